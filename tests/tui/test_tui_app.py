"""The terminal app driven by Textual's Pilot: the real Agent, the real Anthropic SDK, the
in-process fake. Typing and sending, streaming, the status bar, slash commands, cancel, and the
permission dialog."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import pytest
from rich.cells import cell_len
from textual.containers import Vertical
from textual.pilot import Pilot
from textual.widgets import Button, Label
from tui_support import (
    MODEL,
    agent_of,
    app_of,
    enter_line,
    is_compaction,
    log_of,
    outputs,
    run_command,
    running,
    script,
    turn_bodies,
    turn_models,
    type_text,
    wait_until,
    write_config,
)

from evertalk.agent.policy import DENIED
from evertalk.agent.subagents import stop_report
from evertalk.agent.tool_watch import QUIET_TURNS
from evertalk.chat import Chat
from evertalk.client.remote import Message
from evertalk.memory.text import LINE_LIMIT
from evertalk.tui.app import ChatApp
from evertalk.tui.history import EARLIER_MOST, earlier_records
from evertalk.tui.turn_rows import EMPTY_REPLY
from evertalk.tui.widgets import (
    NoteRow,
    OutputRow,
    PermissionScreen,
    PromptInput,
    ReplyView,
    StatusBar,
    ThoughtRow,
    ToolRow,
    UserRow,
    WorkRow,
)
from fakes import AnthropicFake, Script, ToolCall, empty, reply, sized_line, slow, summarizer
from fakes import chat as answer

pytestmark = pytest.mark.anyio

LONG_REPLY = (
    "The log rotates **weekly**: the rule is in `/etc/logrotate.d/notes`, and it keeps four "
    "old files, compressed, before it drops the oldest one."
)


def replies(app: ChatApp) -> list[str]:
    return [view.source for view in app.query(ReplyView)]


def notes(app: ChatApp) -> list[str]:
    return [row.text for row in app.query(NoteRow)]


async def dialog_of(pilot: Pilot[int]) -> PermissionScreen:
    """The permission dialog, once it is up and past its grace period."""
    app = app_of(pilot)
    await wait_until(pilot, lambda: isinstance(app.screen, PermissionScreen))
    dialog = app.screen
    assert isinstance(dialog, PermissionScreen)
    await wait_until(pilot, lambda: dialog.answerable)
    return dialog


async def test_a_message_is_sent_and_its_reply_streams_in(home: Path) -> None:
    fake = AnthropicFake(
        script().push(
            slow(0.1, answer(LONG_REPLY, thinking="Where is the rule?"), chunk_delay=0.05)
        )
    )
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await type_text(pilot, "where does the log rotate?")
        assert app.prompt.text == "where does the log rotate?"
        await pilot.press("enter")
        assert app.prompt.text == ""
        seen: list[str] = []

        def streamed() -> bool:
            seen.extend(replies(app)[-1:])
            return bool(seen) and seen[-1] == LONG_REPLY

        await wait_until(pilot, streamed)
        assert any(0 < len(text) < len(LONG_REPLY) for text in seen), "it came in pieces"
        assert [row.text for row in app.query(UserRow)] == ["where does the log rotate?"]
        thoughts = [row.text for row in app.query(ThoughtRow)]
        assert thoughts == ["Where is the rule?"]
        await wait_until(pilot, lambda: not agent_of(app).busy)
    assert log_of(home) == [("user", "where does the log rotate?"), ("ever", LONG_REPLY)]


async def test_the_status_bar_shows_model_memory_and_cost(home: Path) -> None:
    fake = AnthropicFake(script().push(answer("Noted.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        bar = app.query_one(StatusBar)
        assert bar.text.startswith(f"{MODEL} · mem 0B/128K · ")
        await enter_line(pilot, "remember the milk")
        await wait_until(pilot, lambda: not agent_of(app).busy and replies(app)[-1:] == ["Noted."])
        await pilot.pause(0.6)  # the next refresh of the bar
        view_bytes = agent_of(app).status().view_bytes
        assert view_bytes > 0
        assert f"mem {view_bytes}B/128K" in bar.text
        assert "summaries: " in bar.text
        assert "$" in bar.text and "working" not in bar.text


async def test_memory_shows_the_view_and_the_status(home: Path) -> None:
    fake = AnthropicFake(script().push(answer("Hello.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await type_text(pilot, "hi")
        await pilot.press("enter")
        await wait_until(pilot, lambda: not agent_of(app).busy and replies(app)[-1:] == ["Hello."])
        await type_text(pilot, "/memory")
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(outputs(app)) == 2)
        view, status = outputs(app)
        assert view.splitlines()[0] == "<chat>" and view.splitlines()[-1] == "</chat>"
        assert "0+1|user: hi" in view or "0+2|" in view
        assert "messages  2" in status and "compactor summarizing" in status
        await enter_line(pilot, "/memory zoom 0 1")
        await wait_until(pilot, lambda: len(outputs(app)) == 3)
        assert outputs(app)[-1] == "0+1|user: hi"
        await enter_line(pilot, "/memory zoom 1 2")
        await wait_until(pilot, lambda: len(outputs(app)) == 4)
        assert "multiple of n" in outputs(app)[-1]
        assert app.query(OutputRow).last().has_class("error")
    assert log_of(home) == [("user", "hi"), ("ever", "Hello.")]  # commands are not messages


async def test_ctrl_c_cancels_a_slow_reply_and_keeps_the_message(home: Path) -> None:
    fake = AnthropicFake(script().push(slow(0.1, answer(LONG_REPLY * 4), chunk_delay=0.3)))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "tell me everything")
        await wait_until(pilot, lambda: replies(app) and replies(app)[-1])  # streaming
        assert agent_of(app).busy
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: any(note.startswith("cancelled") for note in notes(app)))
        assert not agent_of(app).busy
        shown = replies(app)[-1]
        assert len(shown) < len(LONG_REPLY * 4)  # what came stays on screen
        # Ctrl+C with nothing running clears what is typed (Ctrl+Z brings it back); it never quits
        await wait_until(pilot, lambda: not app.busy)
        await type_text(pilot, "draft")
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.prompt.text == ""
        assert app.is_running
    log = log_of(home)
    assert log[0] == ("user", "tell me everything")
    # what was on screen is logged, marked as cut off, so a reopen shows what the user saw
    assert log[1][0] == "ever" and log[1][1].startswith(shown.rstrip())
    assert "cut off" in log[1][1].splitlines()[-1]
    assert [kind for kind, _ in log[2:]] in ([], ["echo"])


async def test_a_denied_tool_says_so_in_its_row_and_to_the_model(home: Path) -> None:
    fake = AnthropicFake(
        script().push(
            reply("Let me look.", ToolCall("shell", {"command": "echo [secret]"})),
            answer("You did not allow it, so I did not run it."),
        )
    )
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "what is in there?")
        dialog = await dialog_of(pilot)
        assert dialog.tool == "shell" and dialog.tool_input == {"command": "echo [secret]"}
        await pilot.press("enter")  # Deny has the focus
        await wait_until(pilot, lambda: not agent_of(app).busy and len(replies(app)) == 2)
        row = app.query_one(ToolRow)
        assert row.finished and row.is_error and row.has_class("error")
        assert DENIED in row.output_text
        assert row.heading.startswith("✗ shell  echo [secret]  — the user did not allow")
    log = log_of(home)
    assert log[2] == ("tool", 'shell {"command":"echo [secret]"}')
    assert log[3][0] == "echo" and DENIED in log[3][1]
    assert log[4] == ("ever", "You did not allow it, so I did not run it.")


async def test_a_tool_allowed_once_runs(home: Path) -> None:
    fake = AnthropicFake(
        script().push(reply(ToolCall("shell", {"command": "echo ran-it"})), answer("It ran."))
    )
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "run it")
        await dialog_of(pilot)
        await pilot.press("left", "left", "enter")  # from Deny over Always to Allow once
        await wait_until(pilot, lambda: not agent_of(app).busy and replies(app)[-1:] == ["It ran."])
        row = app.query_one(ToolRow)
        assert not row.is_error and "ran-it" in row.output_text
        assert row.heading == "✓ shell  echo ran-it"


async def test_keys_typed_as_the_dialog_opens_allow_nothing_and_stay_the_users(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = AnthropicFake(
        script().push(
            reply(ToolCall("shell", {"command": "touch ran"})),
            answer("I did not run it."),
            answer("Noted."),
        )
    )
    monkeypatch.setattr(PermissionScreen, "GRACE", 3.0)  # the keys below take less than that
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "check the disk")
        await wait_until(pilot, lambda: isinstance(app.screen, PermissionScreen))
        dialog = app.screen
        assert isinstance(dialog, PermissionScreen) and not dialog.answerable
        # the user goes on typing a message: "a" was "always", "y" "allow once", Enter the
        # focused button; a click too early does nothing either
        await pilot.press(*"always yes", "enter")
        await pilot.click("#once")
        assert app.screen is dialog and not app.query(ToolRow).last().finished
        assert not dialog.answerable, "the test typed too slowly"
        await wait_until(pilot, lambda: dialog.answerable)
        await pilot.press("o", "k")  # letters other than y, n and a go to the message
        assert app.screen is dialog
        await pilot.press("enter")  # Deny has the focus
        await wait_until(pilot, lambda: app.screen is not dialog)
        # what was typed meanwhile reaches the input: the message is sent, "ok" stays
        await wait_until(pilot, lambda: app.prompt.text == "ok")
        await wait_until(pilot, lambda: not agent_of(app).busy and replies(app)[-1:] == ["Noted."])
        row = app.query_one(ToolRow)
        assert row.is_error and DENIED in row.output_text
    assert not (home.parent / "work" / "ran").exists()  # the tools' workdir: tui_support
    log = log_of(home)
    assert ("user", "always yes") in log
    assert log[-1] == ("ever", "Noted.")


async def test_ctrl_c_while_asking_takes_the_dialog_away(home: Path) -> None:
    fake = AnthropicFake(script().push(reply(ToolCall("write", {"path": "x", "content": "y"}))))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "write it")
        await wait_until(pilot, lambda: isinstance(app.screen, PermissionScreen))
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: not isinstance(app.screen, PermissionScreen))
        await wait_until(pilot, lambda: not agent_of(app).busy)
        assert not (home.parent / "work" / "x").exists()
    assert [kind for kind, _ in log_of(home)] == ["user", "tool", "echo"]


async def test_input_lines_history_and_completion(home: Path) -> None:
    fake = AnthropicFake(script())
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        prompt = app.query_one(PromptInput)
        await type_text(pilot, "/mem")
        assert prompt.suggestion == "ory"
        assert "/memory zoom ID N" in str(app.query_one("#hint").render())
        await pilot.press("tab")
        assert prompt.text == "/memory"
        prompt.clear()
        await type_text(pilot, "first line\nsecond line")
        assert prompt.text == "first line\nsecond line"
        await pilot.press("enter")
        await wait_until(pilot, lambda: not agent_of(app).busy and replies(app))
        await type_text(pilot, "a draft")
        await pilot.press("up")
        assert prompt.text == "first line\nsecond line"
        await pilot.press("down")  # the cursor is on the last line: back to the draft
        assert prompt.text == "a draft"
        await pilot.press("ctrl+d")  # not empty: deletes, does not quit
        assert app.is_running
    assert log_of(home)[0] == ("user", "first line\nsecond line")


async def test_model_commands_apply_from_the_next_call(home: Path) -> None:
    # `/model` asks the configured server for its models: here a closed port on this machine,
    # not the provider's real address
    write_config(home, base_url="http://127.0.0.1:9")
    fake = AnthropicFake(script().push(answer("Bonjour.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        agent = agent_of(app)

        command = partial(run_command, pilot)

        assert (await command("/model")).startswith(f"turn model: {MODEL}")
        said = await command("/model claude-opus-5-5")
        assert "from the next turn on" in said
        assert agent.model == "claude-opus-5-5"
        await wait_until(pilot, lambda: app.query_one(StatusBar).text.startswith("claude-opus"))
        said = await command("/memory-model claude-haiku-6 low")
        assert "claude-haiku-6, effort low from the compactor's next call" in said
        settings = agent.compactor.settings
        assert (settings.model, settings.effort) == ("claude-haiku-6", "low")
        said = await command("/memory-model banana split")
        assert "effort is one of" in said and agent.compactor.settings.model == "claude-haiku-6"
        saved = tomllib.loads((home / "config.toml").read_text())
        assert saved["model"] == "claude-opus-5-5"
        assert saved["memory"]["model"] == "claude-haiku-6" and saved["memory"]["effort"] == "low"
        assert (home / "config.toml").stat().st_mode & 0o777 == 0o600
        await enter_line(pilot, "salut")
        await wait_until(pilot, lambda: not agent.busy and replies(app)[-1:] == ["Bonjour."])
    assert turn_models(fake) == ["claude-opus-5-5"]


async def test_other_commands(home: Path) -> None:
    fake = AnthropicFake(script())
    edited: list[Path] = []

    def editor(path: Path) -> None:
        edited.append(path)
        path.write_text("Answer in French.\n")

    async with running(home, fake, editor=editor) as pilot:
        app = app_of(pilot)

        command = partial(run_command, pilot)

        assert "No model calls yet" in await command("/usage")
        said = await command("/instructions edit")
        assert edited == [home / "instructions.md"] and "next start" in said
        help_text = await command("/help")
        assert "/memory zoom ID N" in help_text and "/setup" in help_text
        assert "/agents stop NAME" in help_text
        assert "unknown command /frobnicate" in await command("/frobnicate")
        await enter_line(pilot, "/quit")
        await wait_until(pilot, lambda: not app.is_running)
    assert log_of(home) == []


async def test_waiting_for_summaries_is_shown_then_goes(home: Path) -> None:
    # slow enough that the second message always finds the first reply's line unbuilt
    slow_summaries = Script().route(is_compaction, slow(4.0, summarizer(100)))
    long_reply = "One. " + "More words to remember. " * 40  # past a line: it needs a summary
    fake = AnthropicFake(slow_summaries.push(answer(long_reply), answer("Two.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "first")
        await wait_until(pilot, lambda: not agent_of(app).busy and len(replies(app)) == 1)
        await enter_line(pilot, "second")
        await wait_until(
            pilot, lambda: any(n.startswith("waiting for summaries (") for n in notes(app))
        )
        await wait_until(pilot, lambda: not agent_of(app).busy and len(replies(app)) == 2)
        assert not any(n.startswith("waiting for summaries") for n in notes(app))
    assert [kind for kind, _ in log_of(home)] == ["user", "ever", "user", "ever"]


async def test_a_subagent_report_shows_when_it_starts_a_turn(home: Path) -> None:
    fake = AnthropicFake(
        script()
        .route(
            lambda call: "you are the subagent Scout" in call.last_user_text, answer("Found 42.")
        )
        .push(
            reply(ToolCall("agent", {"name": "Scout", "task": "find the number"})),
            answer("Scout is on it."),
            answer("Scout says 42."),
        )
    )
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "send a scout")
        await wait_until(pilot, lambda: replies(app)[-1:] == ["Scout says 42."])
        works = [row.source for row in app.query(WorkRow)]
        assert works == ["[Scout] Found 42."]
        row = app.query_one(ToolRow)
        assert row.heading.startswith("✓ agent  Scout")


async def test_agents_lists_the_running_subagents_and_stops_one(home: Path) -> None:
    fake = AnthropicFake(
        script()
        .route(lambda call: "you are the subagent Slow" in call.last_user_text, slow(30, empty()))
        .push(
            reply(ToolCall("agent", {"name": "Slow", "task": "read every note"})),
            answer("Slow is on it."),
        )
    )
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        agent = agent_of(app)

        command = partial(run_command, pilot)

        assert await command("/agents") == "no subagent is running"
        await enter_line(pilot, "send Slow")
        await wait_until(pilot, lambda: not agent.busy and replies(app)[-1:] == ["Slow is on it."])
        listed = await command("/agents")
        assert listed.startswith("1 subagent running:\n  Slow  ")
        assert listed.splitlines()[1].endswith("  read every note")
        said = await command("/agents stop Slow")
        assert said == f"stopped Slow; Ever is told: {stop_report('Slow')}"
        assert await command("/agents") == "no subagent is running"
        assert "Slow is not running: it has ended" in await command("/agents stop Slow")
        assert app.query(OutputRow).last().has_class("error")
        assert not agent.busy
    assert log_of(home)[-1] == ("work", stop_report("Slow"))


async def test_quitting_during_a_turn_keeps_what_was_logged(home: Path) -> None:
    fake = AnthropicFake(script().push(slow(5, answer("too late"))))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "a slow one")
        await wait_until(pilot, lambda: agent_of(app).busy)
        await pilot.press("ctrl+d", "ctrl+d")  # while a turn runs, the second one quits
        await wait_until(pilot, lambda: not app.is_running)
    log = log_of(home)  # the turn went on in the service, until the test stopped it
    assert log[0] == ("user", "a slow one")
    assert [kind for kind, _ in log[1:]] in ([], ["echo"])  # no reply: it was cut short


async def test_a_message_sent_during_a_turn_is_held_then_delivered(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home, shell="allow")
    fake = AnthropicFake(
        script().push(
            reply("Checking.", ToolCall("shell", {"command": "sleep 3; echo checked"})),
            answer("Done, and noted."),
        )
    )
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "check the backups")
        await wait_until(pilot, lambda: app.query(ToolRow))
        await enter_line(pilot, "also the rotation")
        rows = list(app.query(UserRow))
        assert [row.text for row in rows] == ["check the backups", "also the rotation"]
        assert rows[1].has_class("held") and not rows[0].has_class("held")
        await wait_until(pilot, lambda: not rows[1].has_class("held"))
        # the markdown stream renders after the event: wait for the text, not only the turn
        await wait_until(
            pilot, lambda: not agent_of(app).busy and replies(app)[-1:] == ["Done, and noted."]
        )
    assert [kind for kind, _ in log_of(home)] == ["user", "ever", "tool", "echo", "user", "ever"]


# -- batches of merges (SPEC §3.4) --------------------------------------------------------------

CEILING = 128_000  # the default budget's; the test checks the status bar says so
BATCH_DEADLINE = 60  # seconds: ~140 summaries through the real SDK on a loaded 2-core machine
MERGED = re.compile(r"memory: merged, view now (\d+\.\d) KB \(was (\d+\.\d) KB\)")


def fill_chat(home: Path, messages: int) -> int:
    """Log `messages` messages whose leaves are free and as large as a free leaf can be, so
    that the view counts them whole with no summary; the view's size after."""
    with Chat.open(home / "chat") as chat:
        for i in range(messages):
            kind = "user" if i % 2 == 0 else "ever"
            head = f"{kind}: "
            chat.append(kind, sized_line(f"note {i} on the backups", LINE_LIMIT - len(head)))
        return chat.core.view.size


def memory_rows(app: ChatApp) -> list[str]:
    return [note for note in notes(app) if note.startswith("memory:")]


def compactor_idle(app: ChatApp) -> bool:
    status = agent_of(app).status()
    return status.compactor_running == 0 and status.compactor_queued == 0


async def test_a_batch_waiting_for_summaries_shows_its_start_and_its_end(home: Path) -> None:
    # one message past the ceiling, logged with no compactor: no parent is built, so the batch
    # has started and waits; the app opens on it
    size = fill_chat(home, CEILING // LINE_LIMIT + 1)
    assert size > CEILING
    fake = AnthropicFake(script().push(answer("Noted.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        bar = app.query_one(StatusBar)
        await wait_until(pilot, lambda: memory_rows(app))
        assert memory_rows(app) == [
            f"memory: the view passed 128 KB, merging it down to 64 KB as summaries come "
            f"(now {size / 1000:.1f} KB)"
        ]
        assert f"mem {round(size / 1000)}K/128K, merging · " in bar.text
        # the batch goes on at the next message, with whatever is built by then
        await wait_until(pilot, lambda: compactor_idle(app), timeout=BATCH_DEADLINE)
        await enter_line(pilot, "what do you remember?")
        await wait_until(pilot, lambda: len(memory_rows(app)) == 2, timeout=BATCH_DEADLINE)
        found = MERGED.fullmatch(memory_rows(app)[1])
        assert found is not None, memory_rows(app)
        assert float(found[1]) <= 64.1 and found[2] == f"{size / 1000:.1f}"
        await wait_until(pilot, lambda: not agent_of(app).busy and replies(app)[-1:] == ["Noted."])
        status = agent_of(app).status()
        assert not status.merging and status.view_bytes <= status.view_floor + 100
        shown = f"mem {round(status.view_bytes / 1000)}K/128K · summaries: idle"
        await wait_until(pilot, lambda: shown in bar.text, timeout=BATCH_DEADLINE)


async def test_a_batch_done_within_one_message_shows_one_row(home: Path) -> None:
    # exactly at the ceiling: not above it, so no batch yet; every parent gets built first
    size = fill_chat(home, CEILING // LINE_LIMIT)
    assert size == CEILING
    fake = AnthropicFake(script().push(answer("Noted.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        bar = app.query_one(StatusBar)
        await wait_until(pilot, lambda: compactor_idle(app), timeout=BATCH_DEADLINE)
        app.refresh_status()  # a sample at the ceiling, not above it: nothing to say
        await pilot.pause()  # a row would be mounted by now
        assert memory_rows(app) == [] and "mem 128K/128K · " in bar.text
        await enter_line(pilot, "hello again")
        await wait_until(pilot, lambda: memory_rows(app), timeout=BATCH_DEADLINE)
        found = MERGED.fullmatch(memory_rows(app)[0])
        assert found is not None, memory_rows(app)
        assert float(found[1]) <= 64.1 and found[2] == "128.0"
        await wait_until(pilot, lambda: not agent_of(app).busy and replies(app)[-1:] == ["Noted."])
        app.refresh_status()
        await pilot.pause()
        assert len(memory_rows(app)) == 1  # never seen waiting: no start row


async def test_an_image_attached_with_a_command_goes_with_the_next_message(
    home: Path, tmp_path: Path
) -> None:
    picture, notes_file = tmp_path / "shot.png", tmp_path / "notes.png"
    picture.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x02" * 30)
    notes_file.write_text("not a picture")
    fake = AnthropicFake(script().push(answer("A screenshot."), answer("Plain.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)

        command = partial(run_command, pilot)

        assert "no image attached" in await command("/image")
        assert "not a PNG, JPEG, GIF or WebP image" in await command(f"/image {notes_file}")
        assert app.prompt.border_title is None
        assert "attached shot.png (38 B);" in await command(f"/image {picture}")
        assert app.prompt.border_title == "1 image attached: shot.png"  # until it is sent
        assert "shot.png" in await command("/image")
        await enter_line(pilot, "what is this?")
        await wait_until(pilot, lambda: replies(app)[-1:] == ["A screenshot."])
        assert "with shot.png" in notes(app)
        assert app.prompt.border_title is None
        assert "no image attached" in await command("/image")  # it went with the message
        await wait_until(pilot, lambda: not agent_of(app).busy)
        await enter_line(pilot, "and now?")
        await wait_until(pilot, lambda: replies(app)[-1:] == ["Plain."])
    first, second = (body["messages"][0]["content"] for body in turn_bodies(fake))
    assert [block["type"] for block in first[-2:]] == ["text", "image"]
    assert second[-1]["type"] == "text"  # the next message has no image


async def test_a_failed_summary_shows_a_memory_row_and_the_status_bar_counts_it(
    home: Path,
) -> None:
    with Chat.open(home / "chat") as chat:
        chat.append("user", "the restore drill took forty minutes; " * 20)  # its leaf needs a call
    fake = AnthropicFake(Script().route(is_compaction, empty()))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        bar = app.query_one(StatusBar)
        await wait_until(pilot, lambda: memory_rows(app))
        assert memory_rows(app) == [
            "memory: 0+1 could not be summarized (the model gave no usable line); "
            "it will be tried again"
        ]
        assert app.query(NoteRow).last().has_class("memory")
        await wait_until(pilot, lambda: "· summaries: 1 failed · " in bar.text)


def answered(app: ChatApp, count: int) -> bool:
    """`count` replies shown, and no turn running."""
    return len(replies(app)) == count and not agent_of(app).busy


async def test_a_model_that_calls_no_tools_gets_a_row_and_a_mark_in_the_bar(home: Path) -> None:
    # every turn a reply that tells of a command run, and no tool call
    said = answer("I ran `df -h`: the disk is 40% full.")
    fake = AnthropicFake(Script(said).route(is_compaction, summarizer(100)))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        bar = app.query_one(StatusBar)
        for n in range(1, QUIET_TURNS + 1):
            assert "tools unused" not in bar.text
            await enter_line(pilot, f"message {n}")
            await wait_until(pilot, partial(answered, app, n))
        await wait_until(pilot, lambda: any(t.startswith("tools: ") for t in notes(app)))
        (row,) = [row for row in app.query(NoteRow) if row.text.startswith("tools: ")]
        assert f"{MODEL} was offered tools" in row.text and row.has_class("error")
        assert bar.text.startswith(f"{MODEL} · tools unused · mem ")


# -- what a user ran into -----------------------------------------------------------------------


def command_rows(app: ChatApp) -> list[str]:
    return [row.text for row in app.query(NoteRow) if row.has_class("command")]


@pytest.mark.parametrize("editor", ["nonexistent-ed", '"unclosed'])
async def test_an_editor_that_cannot_run_is_reported_and_the_app_goes_on(
    home: Path, monkeypatch: pytest.MonkeyPatch, editor: str
) -> None:
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", editor)
    async with running(home, AnthropicFake(script())) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "/instructions edit")
        await wait_until(pilot, lambda: outputs(app))
        said = outputs(app)[-1]
        assert said.startswith(f"cannot run the editor {editor!r}: ")
        assert said.endswith("(set $VISUAL or $EDITOR)")
        assert app.query(OutputRow).last().has_class("error")
        await enter_line(pilot, "/help")  # it still answers
        await wait_until(pilot, lambda: "/memory zoom ID N" in outputs(app)[-1])


async def test_an_editor_that_fails_to_start_lets_the_app_resume(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pilot's driver cannot suspend: a stand-in records whether the block ended normally, the
    # only way Textual's own `suspend` gives the terminal back to the app
    seen: list[str] = []

    @contextmanager
    def suspend(self: ChatApp) -> Iterator[None]:
        seen.append("suspended")
        yield
        seen.append("resumed")

    editor = tmp_path / "editor"
    editor.write_text("no interpreter line: exec fails\n")
    editor.chmod(0o700)
    monkeypatch.setattr(ChatApp, "suspend", suspend)
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", str(editor))
    async with running(home, AnthropicFake(script())) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "/instructions edit")
        await wait_until(pilot, lambda: outputs(app))
        assert seen == ["suspended", "resumed"]
        assert outputs(app)[-1].startswith(f"cannot run the editor {str(editor)!r}: ")


async def test_an_empty_reply_says_so(home: Path) -> None:
    fake = AnthropicFake(script().push(empty(), answer("Here.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "hello?")
        await wait_until(pilot, lambda: EMPTY_REPLY in notes(app))
        await wait_until(pilot, lambda: not agent_of(app).busy)
        await enter_line(pilot, "hello again")
        await wait_until(pilot, lambda: not agent_of(app).busy and replies(app) == ["Here."])
        assert notes(app).count(EMPTY_REPLY) == 1  # a reply was shown the second time


async def test_a_command_shows_the_line_that_ran_it(home: Path) -> None:
    async with running(home, AnthropicFake(script())) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "/memory   zoom 3")
        await wait_until(pilot, lambda: outputs(app))
        assert command_rows(app) == ["/memory zoom 3"]
        last = list(app.chat_log.children)[-2:]
        assert isinstance(last[0], NoteRow) and last[0].has_class("command")
        assert isinstance(last[1], OutputRow) and last[1].text.startswith("usage: /memory zoom")


async def test_the_dialog_and_the_status_bar_fit_a_narrow_terminal(home: Path) -> None:
    fake = AnthropicFake(
        script().push(
            reply(ToolCall("shell", {"command": "du -sh /var/log " + "--apparent-size " * 3})),
            answer("Done."),
        )
    )
    async with running(home, fake, size=(60, 24)) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "how big are the logs?")
        dialog = await dialog_of(pilot)
        await pilot.pause()
        box = dialog.query_one(Vertical).content_region
        for button in dialog.query(Button):
            label = str(button.label)
            assert button.region.right <= box.right, label  # the whole button is inside
            assert button.content_region.width >= cell_len(label), label  # the label whole
        assert {str(button.label) for button in dialog.query(Button)} == {
            "Allow once",
            "Always this command",
            "Deny",
        }
        hint = dialog.query_one("#keys", Label)
        assert hint.region.right <= box.right and hint.region.height >= 2  # wrapped, not cut
        bar = app.query_one(StatusBar)
        assert bar.text.endswith(" · working") and cell_len(bar.text) <= 58
        await pilot.press("enter")
        await wait_until(pilot, lambda: not agent_of(app).busy)


def earlier_log(home: Path) -> None:
    """A chat whose last 8 messages start inside a turn of tool calls (one long enough to be
    logged in two pages), then a cancelled turn."""
    long_write = {"path": "notes.txt", "content": "word " * 7_000}
    with Chat.open(home / "chat") as chat:
        chat.append("user", "an older question")
        chat.append("ever", "An older answer.")
        chat.append("user", "check the disk")
        chat.append("ever", "Looking.", key="t1-0-m0")
        chat.append("tool", 'shell {"command":"df -h"}', key="t1-0-m1")
        chat.append("echo", "shell: /dev/sda1 40%\n[exit status 0]", key="t1-0-m2")
        chat.append("tool", 'shell {"command":"rm -rf /tmp/x"}', key="t1-0-m3")
        chat.append("echo", f"shell: {DENIED}", key="t1-0-m4")
        chat.append("tool", "write " + json.dumps(long_write), key="t1-1-m0")
        chat.append("echo", "write: wrote notes.txt", key="t1-1-m1")
        chat.append("ever", "The disk is 40% full.", key="t1-2-m0")
        chat.append("user", "and the other one?")
        chat.append("echo", "turn stopped: cancelled by the user", key="turn-2-stop")


async def test_earlier_tool_calls_show_as_tool_rows_from_the_start_of_their_turn(
    home: Path,
) -> None:
    earlier_log(home)
    assert log_of(home)[9][0] == "tool"  # the long call takes two messages
    async with running(home, AnthropicFake(script())) as pilot:
        app = app_of(pilot)
        rows = list(app.chat_log.children)
        assert isinstance(rows[0], NoteRow)
        assert rows[0].text.startswith("14 messages in this chat; the last 12 follow.")
        shown = [type(row).__name__ for row in rows[1:]]
        assert shown == [
            "UserRow",
            "ReplyView",
            "ToolRow",
            "ToolRow",
            "ToolRow",
            "ReplyView",
            "UserRow",
            "NoteRow",
        ]
        assert isinstance(rows[1], UserRow) and rows[1].text == "check the disk"
        tools = list(app.query(ToolRow))
        assert [tool.heading for tool in tools[:2]] == [
            "✓ shell  df -h",
            f"✗ shell  rm -rf /tmp/x  — {DENIED}",
        ]
        assert "[exit status 0]" in tools[0].output_text
        assert tools[2].heading == "✓ write  notes.txt" and not tools[2].is_error
        assert tools[2].output_text == "wrote notes.txt"
        assert notes(app)[-1] == "turn stopped: cancelled by the user"


def test_the_history_shown_starts_where_its_turn_did() -> None:
    def log(kinds: str) -> list[Message]:
        names = {"u": "user", "e": "ever", "t": "tool", "o": "echo"}
        return [Message(i, names[k], k) for i, k in enumerate(kinds)]

    def start(kinds: str) -> int:
        records = log(kinds)  # the app asks the service for the last EARLIER_MOST
        return len(records) - len(earlier_records(records[-EARLIER_MOST:]))

    assert start("ue") == 0
    assert start("u" + "e" * 7) == 0
    assert start("ue" + "to" * 10) == 0  # the turn opened 22 messages back
    assert start("ueu" + "to" * 10) == 2
    assert start("ue" + "to" * 4 + "u" + "e" * 9) == 10  # 10 back: the last 8 are in its turn
    assert start("u" + "to" * 25) == 51 - 8  # more than 40 back: the last 8 alone
    assert start("e" * 20) == 12
