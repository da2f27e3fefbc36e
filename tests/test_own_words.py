"""Every text a model reads is in this project's words: none shares a run of six words with the
design specification it implements (SPEC.md, issue 37). The specification lives beside the
repository, not in it; where it is absent the check cannot run and says so."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from evertalk import mcp_server, prompts, search_tool
from evertalk.compactor import tasks
from evertalk.memory.coarse import coarse_text
from evertalk.memory.text import PLACEHOLDER
from evertalk.providers.base import Tool

RUN = 6
"""The shortest run of words in common that counts as copied."""

NAMES = (re.escape(PLACEHOLDER), r"\[not yet summarized: messages [^\]]*\]")
"""The fixed marks of the view, which SPEC defines and the texts must name as they are (SPEC
§5 lets such identifying phrases be reused): each stands apart, as a run of its own."""

_REPO = Path(__file__).resolve().parent.parent


def _spec_path() -> Path | None:
    """SPEC.md: where `EVERTALK_SPEC` says, else in `shared/` beside the repository."""
    named = os.environ.get("EVERTALK_SPEC")
    path = Path(named) if named else _REPO.parent / "shared" / "SPEC.md"
    return path if path.is_file() else None


def stretches(text: str) -> list[list[str]]:
    """The text's words, lower case, numbers included: punctuation, markup and quotes do not
    hide a copy. A fixed mark splits the text, so that no run goes across it."""
    pieces = re.split("|".join(NAMES), text.lower())
    return [re.findall(r"[a-z0-9]+", piece) for piece in pieces]


def runs_of(tokens: list[str]) -> list[tuple[str, ...]]:
    return [tuple(tokens[i : i + RUN]) for i in range(len(tokens) - RUN + 1)]


def ngrams(text: str) -> set[tuple[str, ...]]:
    """Every run of RUN words of the text."""
    return {run for tokens in stretches(text) for run in runs_of(tokens)}


def shared_runs(text: str, source: set[tuple[str, ...]]) -> list[str]:
    """The longest runs of at least RUN words of `text` that also occur in the source (given as
    its `ngrams`), in their order."""
    found: list[str] = []
    for tokens in stretches(text):
        spans: list[tuple[int, int]] = []
        for start, run in enumerate(runs_of(tokens)):
            if run not in source:
                continue
            if spans and start <= spans[-1][1]:
                spans[-1] = (spans[-1][0], start + RUN)
            else:
                spans.append((start, start + RUN))
        found += [" ".join(tokens[a:b]) for a, b in spans]
    return found


def _tool_texts(tool: Tool) -> Iterator[str]:
    yield tool.description
    properties = tool.input_schema.get("properties", {})
    assert isinstance(properties, dict)
    for prop in properties.values():
        yield str(prop.get("description", ""))


def model_texts() -> dict[str, str]:
    """Every text the model reads, rendered with sample values, by where it comes from."""
    # imported here: the agent's modules are slow to import, and collection should stay quick
    from evertalk.agent.session import subagent_marker
    from evertalk.agent.subagents import quit_report, stop_report
    from evertalk.agent.tools.agent import DEPTH_ERROR, NAME_RULE

    texts = {
        "prompts.system_text": prompts.system_text("I am Ana; keep commits small."),
        "prompts.NO_TOOLS_NOTE": prompts.NO_TOOLS_NOTE,
        "prompts.turn_header": prompts.turn_header(datetime(2031, 5, 17, 9, 41, 7)),
        "session.subagent_marker": subagent_marker("Scout"),
        "subagents.quit_report": quit_report("Scout"),
        "subagents.stop_report": stop_report("Scout"),
        "tools.agent.errors": f"{DEPTH_ERROR}. {NAME_RULE}",
        "memory.placeholders": f"{PLACEHOLDER} {coarse_text((3, 1))}",
        "tasks.leaf_task": tasks.leaf_task(12, "user", "Move the notes to ~/archive."),
        "tasks.merge_task": tasks.merge_task((1, 4), "left text", (1, 5), "right text"),
        "tasks.too_long": tasks.too_long("x" * 600),
        "tasks.sent_back": tasks.sent_back("y" * 2_000),
        "tasks.not_grounded": tasks.not_grounded(["/srv/a", "ERR42"], low_share=True),
    }
    for tool in [*prompts.TOOLS, search_tool.SEARCH]:
        texts[f"tool {tool.name}"] = "\n".join(_tool_texts(tool))
    for name in dir(mcp_server):
        value = getattr(mcp_server, name)
        if (name == "INSTRUCTIONS" or name.endswith("_DESCRIPTION")) and isinstance(value, str):
            texts[f"mcp_server.{name}"] = value
    return texts


def test_the_checker_finds_a_copied_run_and_spares_a_short_one() -> None:
    source = ngrams("Zoom until the part is whole, before acting on a guess.")
    assert shared_runs("You must zoom until the part is whole; then act.", source) == [
        "zoom until the part is whole"
    ]
    assert shared_runs("Zoom until the part is entire.", source) == []
    # a fixed mark of the view may be named, and no run goes across it
    marked = f"The line `{PLACEHOLDER}` stands for one message."
    assert shared_runs(marked, ngrams(marked)) == []


def test_the_texts_cover_every_tool() -> None:
    texts = model_texts()
    for tool in [*prompts.TOOLS, search_tool.SEARCH]:
        assert tool.description in texts[f"tool {tool.name}"]
    assert {"mcp_server.INSTRUCTIONS", "mcp_server.NOTE_DESCRIPTION"} <= set(texts)


def test_no_model_text_shares_six_words_with_the_spec() -> None:
    path = _spec_path()
    if path is None:
        pytest.skip("SPEC.md not found: set EVERTALK_SPEC to its path")
    source = ngrams(path.read_text(encoding="utf-8"))
    found = {
        where: runs for where, text in model_texts().items() if (runs := shared_runs(text, source))
    }
    report = "\n".join(f"{where}: {' | '.join(runs)}" for where, runs in found.items())
    assert not found, f"runs of {RUN}+ words shared with SPEC.md:\n{report}"
