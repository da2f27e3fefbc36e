"""`/image` given a path as a terminal drops it, `/model` with the server's list of models, and
the status bar's words in plain terms, explained by `/help` (no app running)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evertalk.providers.model_list import ModelList, is_listed, served_models
from evertalk.service import commands as served
from evertalk.tui import commands
from evertalk.tui.commands import Attachments, CommandError, image_paths
from evertalk.tui.status import status_line
from tui.test_tui_commands import status

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 30


@pytest.fixture
def pictures(tmp_path: Path) -> Path:
    folder = tmp_path / "My Pictures"
    folder.mkdir()
    for name in ("a b.png", "c.png", "it's.png"):
        (folder / name).write_bytes(PNG)
    return folder


def attach(typed: str, workdir: Path) -> tuple[str, list[str]]:
    """`/image` as the app reads the line: its words, split on spaces."""
    attachments = Attachments()
    said = attachments.command(tuple(typed.split()), workdir)
    return said, [path.name for path, _ in attachments.files]


def test_a_dropped_path_is_taken_quoted_escaped_or_as_an_address(pictures: Path) -> None:
    whole = pictures / "a b.png"
    escaped = str(whole).replace(" ", "\\ ")
    for typed in (
        f"'{whole}'",
        f'"{whole}"',
        escaped,
        f"'{whole}' ",  # a terminal adds a space after what it drops
        f"file://{str(whole).replace(' ', '%20')}",
        str(whole),  # typed as it is, spaces and all
        "'My Pictures/a b.png'",  # relative: from the working folder
    ):
        said, names = attach(typed, pictures.parent)
        assert names == ["a b.png"], typed
        assert said == "attached a b.png (38 B); it goes with your next message"
    assert image_paths(f"'{pictures}/it'\\''s.png'", pictures) == [pictures / "it's.png"]
    assert image_paths(str(pictures / "it's.png"), pictures) == [pictures / "it's.png"]


def test_a_drop_of_several_files_attaches_each(pictures: Path) -> None:
    said, names = attach(f"'{pictures}/a b.png' '{pictures}/c.png'", pictures)
    assert names == ["a b.png", "c.png"]
    assert said == "attached a b.png (38 B), c.png (38 B); they go with your next message"


def test_a_path_that_is_not_there_is_named_as_typed(pictures: Path) -> None:
    with pytest.raises(CommandError, match=r"My Pictures/no such\.png: No such file"):
        attach(f"{pictures}/no such.png", pictures)
    with pytest.raises(CommandError, match=r"'unclosed\.png: No such file"):
        attach("'unclosed.png", pictures)  # an unclosed quote: taken as it is
    attachments = Attachments()
    with pytest.raises(CommandError):  # one of two missing: neither is attached
        attachments.command((f"'{pictures}/c.png'", "'gone.png'"), pictures)
    assert attachments.files == []


def test_clear_takes_nothing_after_it(pictures: Path) -> None:
    attachments = Attachments()
    attachments.command((str(pictures / "c.png"),), pictures)
    with pytest.raises(CommandError, match=r"^usage: /image \[PATH\|clear\]: /image clear takes"):
        attachments.command(("clear", "extra"), pictures)
    assert len(attachments.files) == 1
    assert attachments.command(("clear",), pictures) == "dropped 1 image"


def test_the_status_bar_says_what_the_summaries_do_in_plain_words() -> None:
    assert " · summaries: idle · " in status_line(status())
    assert " · summaries: 12 queued · " in status_line(status(compactor_queued=12))
    merging = status_line(status(view_bytes=131_000, merging=True, compactor_running=2))
    assert "mem 131K/128K, merging · summaries: 2 running · " in merging
    for line in (status_line(status()), merging):
        assert "memory idle" not in line and "summarizing" not in line


def test_help_explains_every_word_the_status_bar_shows() -> None:
    text = commands.help_text()
    bar = text[text.index("The status bar") :]
    busy = status(
        merging=True,
        compactor_running=3,
        compactor_queued=12,
        compactor_failed=1,
        busy=True,
        subagents=2,
        tools_unused=True,
    )
    words = " ".join(status_line(one) for one in (busy, status()))
    for word in ("mem", "merging", "summaries:", "running", "queued", "failed", "idle", "$"):
        assert word in words and word in bar, word
    for word in ("tools unused", "subagents", "working", "Ctrl+C", "catching up"):
        assert word in bar, word
    assert "cview" in text[text.index("In /memory") :]


def listing(*ids: str) -> ModelList:
    return ModelList(ids=ids)


def test_model_shows_the_servers_models_or_why_not() -> None:
    def nothing(name: str) -> None:
        raise AssertionError("not changed")

    shown = served.model_text("claude-sonnet-5-5", nothing, (), lambda: listing("a", "b"))
    assert shown.splitlines()[-1] == "the server has: a, b"
    failed = ModelList(error="no server answers at http://127.0.0.1:9/v1: is it running?")
    shown = served.model_text("m", nothing, (), lambda: failed)
    assert shown.splitlines() == [
        "turn model: m",
        "set it with /model NAME",
        f"(the server's models could not be listed: {failed.error})",
    ]
    assert served.model_text("m", nothing, (), lambda: listing()).endswith("lists no model")
    many = tuple(f"model-{n:03d}" for n in range(100))
    assert served.names(many).endswith("model-039 and 60 more")


def test_a_model_the_server_does_not_list_is_refused_naming_those_it_has() -> None:
    chosen: list[str] = []
    ids = ("claude-opus-5-5-20260301", "claude-sonnet-5-5-20260115", "claude-haiku-5-5")

    def models() -> ModelList:
        return listing(*ids)

    with pytest.raises(CommandError) as refused:
        served.model_text("x", chosen.append, ("claude-sonet-5-5",), models, "anthropic")
    assert str(refused.value) == (
        "unknown model claude-sonet-5-5; the server has: claude-sonnet-5-5-20260115, "
        "claude-haiku-5-5, claude-opus-5-5-20260301"
    )  # the names most like it first
    assert chosen == []
    said = served.model_text("x", chosen.append, ("claude-opus-5-5",), models, "anthropic")
    assert said.startswith("turn model: claude-opus-5-5 from the next turn on")
    said = served.model_text("x", chosen.append, ("anything",), lambda: ModelList(error="down"))
    assert said.endswith("saved to config.toml\n(not checked: down)")
    assert chosen == ["claude-opus-5-5", "anything"]  # no list: nothing to check against


def test_a_name_a_server_takes_for_a_listed_one_is_known() -> None:
    assert is_listed("anthropic", "claude-sonnet-4-5", ("claude-sonnet-4-5-20250929",))
    assert is_listed("anthropic", "claude-3-5-sonnet-latest", ("claude-3-5-sonnet-20241022",))
    assert not is_listed("anthropic", "claude-sonnet-4", ("claude-sonnet-4-5-20250929",))
    assert is_listed("ollama", "qwen3", ("qwen3:latest",))
    assert not is_listed("ollama", "qwen3:32b", ("qwen3:8b",))
    assert is_listed("openrouter", "meta/llama-4:free", ("meta/llama-4",))
    assert not is_listed("openai", "gpt-9", ("gpt-5",))


def test_the_list_is_asked_for_once_in_a_while() -> None:
    asked: list[str] = []
    now = [1000.0]

    def lister(provider: str, key: str | None, url: str | None, timeout: float) -> tuple[str, ...]:
        asked.append(provider)
        if url is None:
            raise OSError("down")
        return ("m",)

    def ask(url: str | None) -> ModelList:
        return served_models("vllm", "k", url, clock=lambda: now[0], lister=lister)

    where = f"http://127.0.0.1:1/v1?{id(asked)}"  # a server no other test asked
    assert ask(where) == ask(where) == ModelList(ids=("m",)) and len(asked) == 1
    now[0] += 301
    ask(where)
    assert len(asked) == 2
    down = served_models("vllm", f"k{id(asked)}", None, clock=lambda: now[0], lister=lister)
    assert down.error == "the list could not be read (OSError)" and not down.ids
    now[0] += 10  # a failure is kept briefly: a server down slows one /model, not each
    served_models("vllm", f"k{id(asked)}", None, clock=lambda: now[0], lister=lister)
    assert len(asked) == 3
    now[0] += 31
    served_models("vllm", f"k{id(asked)}", None, clock=lambda: now[0], lister=lister)
    assert len(asked) == 4
