"""A window follows the log: after any reconnection (a stop, a crash, another client's restart)
it shows what was logged meanwhile, its status is the service's it is connected to, a forget
leaves none of the forgotten text in it, and a message left unanswered by a crash is offered
again."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from textual.widget import Widget
from tui_support import (
    HOSTS,
    SIZE,
    agent_of,
    app_of,
    enter_line,
    fake_opener,
    hosted,
    log_of,
    running,
    script,
    turn_bodies,
    wait_until,
    workdir_of,
    write_config,
)

from evertalk.cli import main
from evertalk.client.connection import stop_service
from evertalk.client.remote import Received, Remote, open_remote
from evertalk.protocol.replies import Accepted, Forgotten
from evertalk.protocol.requests import Forget, Send, Stop
from evertalk.tui.app import ChatApp
from evertalk.tui.widgets import NoteRow, OutputRow, ReplyView, ThoughtRow, ToolRow, UserRow
from fakes import AnthropicFake, serve, slow
from fakes import chat as answer

pytestmark = pytest.mark.anyio

SECRET = "hunter-4417-passphrase"


def users(app: ChatApp) -> list[str]:
    return [row.text for row in app.query(UserRow)]


def replies(app: ChatApp) -> list[str]:
    return [view.source for view in app.query(ReplyView)]


def drawn(app: ChatApp) -> list[tuple[str, str]]:
    """The user rows and the replies, in the order they are drawn."""
    rows: list[tuple[str, str]] = []
    for row in app.chat_log.children:
        if isinstance(row, UserRow):
            rows.append(("user", row.text))
        elif isinstance(row, ReplyView):
            rows.append(("ever", row.source))
    return rows


def text_of(row: Widget) -> str:
    for name in ("text", "source", "output_text", "heading"):
        value = getattr(row, name, None)
        if isinstance(value, str):
            return value
    return ""


def shown(app: ChatApp) -> str:
    """Every text the window holds: its rows, and the messages Up brings back."""
    rows = [text_of(row) for row in app.chat_log.walk_children()]
    return "\n".join([*rows, *app.prompt.sent])


class Other:
    """Another window: a client of the service that sends and listens."""

    def __init__(self, remote: Remote) -> None:
        self.remote = remote
        self.frames: list[Received] = []

    async def read(self) -> None:
        async for frame in self.remote.frames():
            self.frames.append(frame)

    async def send(self, text: str) -> Accepted:
        return await self.remote.request(Send(text=text, key=text), Accepted)


@asynccontextmanager
async def listening(remote: Remote) -> AsyncIterator[Other]:
    other = Other(remote)
    async with anyio.create_task_group() as group:
        group.start_soon(remote.run)
        group.start_soon(other.read)
        try:
            yield other
        finally:
            await remote.aclose()


async def stop_from_another_client(home: Path) -> None:
    """As `evertalk service stop` asks it."""
    remote = await open_remote(home, "stop", start=False)
    try:
        await remote.post(Stop())
    finally:
        await remote.aclose()


async def forget_from_another_client(home: Path, words: str) -> None:
    """As `evertalk memory forget WORDS --yes` does while a service runs."""
    remote = await open_remote(home, "forget", start=False)
    async with anyio.create_task_group() as group:
        group.start_soon(remote.run)
        try:
            await remote.request(Forget(range=words, reason="a secret"), Forgotten)
        finally:
            await remote.aclose()


async def test_a_window_stopped_on_purpose_follows_the_next_service_and_shows_what_it_missed(
    home: Path,
) -> None:
    fake = AnthropicFake(script().push(answer("Answer to A."), answer("Answer to B.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        host = HOSTS[id(app)]
        await stop_from_another_client(home)
        await wait_until(pilot, lambda: app.remote is None and app.paused is not None)
        # another window sends: that starts the next service, which answers it
        async with listening(await host.connect(client="other")) as other:
            await other.send("from A meanwhile")
            await wait_until(pilot, lambda: ("ever", "Answer to A.") in log_of(home), timeout=20)
            # this window follows the service that runs now, and shows what it missed
            await wait_until(
                pilot,
                lambda: "Answer to A." in replies(app) and "from A meanwhile" in users(app),
                timeout=10,
            )
            assert app.remote is not None and app.paused is None
            await wait_until(pilot, lambda: "stopped" not in app.status_bar.text)
            await enter_line(pilot, "from B")
            await wait_until(pilot, lambda: "Answer to B." in replies(app), timeout=20)
        assert drawn(app) == [
            ("user", "from A meanwhile"),
            ("ever", "Answer to A."),
            ("user", "from B"),
            ("ever", "Answer to B."),
        ]


async def test_a_forget_by_another_client_leaves_no_forgotten_text_in_the_window(
    home: Path,
) -> None:
    fake = AnthropicFake(script().push(answer(f"I keep {SECRET} safe."), answer("Noted.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, f"my passphrase is {SECRET}")
        await wait_until(pilot, lambda: replies(app) == [f"I keep {SECRET} safe."], timeout=20)
        await wait_until(pilot, lambda: not agent_of(app).busy)
        await enter_line(pilot, "and the weather?")
        await wait_until(pilot, lambda: "Noted." in replies(app), timeout=20)
        assert SECRET in shown(app)
        await forget_from_another_client(home, "0-1")
        await wait_until(pilot, lambda: SECRET not in shown(app), timeout=10)
        assert users(app)[0].startswith("[forgotten on ")
        assert drawn(app)[2:] == [("user", "and the weather?"), ("ever", "Noted.")]
        # and the app still follows: a new message shows once
        await enter_line(pilot, "one more")
        await wait_until(pilot, lambda: users(app)[-1] == "one more", timeout=20)
        assert users(app).count("one more") == 1


async def test_forget_in_the_window_takes_its_preview_and_the_rows_too(home: Path) -> None:
    fake = AnthropicFake(script().push(answer(f"Kept: {SECRET}.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, f"remember {SECRET}")
        await wait_until(pilot, lambda: replies(app) == [f"Kept: {SECRET}."], timeout=20)
        await wait_until(pilot, lambda: not agent_of(app).busy)
        count = len(app.query(OutputRow))
        await enter_line(pilot, "/forget 0-1")  # the preview quotes the messages
        await wait_until(pilot, lambda: len(app.query(OutputRow)) > count)
        await enter_line(pilot, "/forget 0-1 yes")
        await wait_until(
            pilot, lambda: any("Forgotten:" in row.text for row in app.query(OutputRow))
        )
        await wait_until(pilot, lambda: SECRET not in shown(app), timeout=10)
        assert [text[:14] for text in users(app)] == ["[forgotten on "]


async def test_a_held_message_looks_held_in_every_theme(home: Path) -> None:
    async with running(home, AnthropicFake(script())) as pilot:
        app = app_of(pilot)
        sent, held = UserRow("sent"), UserRow("waiting", held=True)
        await app.chat_log.mount_all([sent, held])
        for name in list(app.available_themes):
            app.theme = name
            await pilot.pause()
            assert sent.styles.border_left[1] != held.styles.border_left[1], name
        assert "waits for the running turn" in str(held.render())
        held.delivered()
        assert "waits for the running turn" not in str(held.render())


FIRST = "The first answer, which streams in pieces, a while."


async def test_a_held_message_stays_below_the_reply_of_the_running_turn(home: Path) -> None:
    fake = AnthropicFake(
        script().push(slow(1.5, answer(FIRST), chunk_delay=0.3), answer("The second answer."))
    )
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        async with listening(await open_remote(home, "other", start=False)) as other:
            await enter_line(pilot, "first")
            await wait_until(pilot, lambda: agent_of(app).turning)
            await other.send("meanwhile")
            await wait_until(pilot, lambda: bool(replies(app)), timeout=10)
            # the reply streams above the message that waits for its turn to end
            assert [kind for kind, _ in drawn(app)] == ["user", "ever", "user"]
            assert drawn(app)[2] == ("user", "meanwhile")
            assert replies(app)[0] != FIRST  # still streaming
            (row,) = [row for row in app.query(UserRow) if row.text == "meanwhile"]
            assert row.has_class("held")
            await wait_until(pilot, lambda: "The second answer." in replies(app), timeout=20)
        assert drawn(app) == [
            ("user", "first"),
            ("ever", FIRST),
            ("user", "meanwhile"),
            ("ever", "The second answer."),
        ]
        assert not app.query(ThoughtRow) and not app.query(ToolRow)


async def test_a_message_left_unanswered_by_a_crash_is_offered_again(tmp_path: Path) -> None:
    """The window's service is a process of its own, killed with SIGKILL mid-turn."""
    home = tmp_path / "home"
    fake = AnthropicFake(script().push(slow(30, answer("never")), answer("One, two, three.")))
    with serve(fake.app) as url:
        write_config(home, base_url=url)
        app = ChatApp(home, workdir=workdir_of(home))
        try:
            async with app.run_test(size=SIZE) as pilot:
                with anyio.fail_after(30):
                    await app.ready.wait()
                await enter_line(pilot, "count to three")
                await wait_until(pilot, lambda: bool(turn_bodies(fake)), timeout=20)
                assert app.remote is not None
                first = app.remote.pid
                os.kill(first, signal.SIGKILL)
                await wait_until(
                    pilot,
                    lambda: app.remote is not None and app.remote.pid != first,
                    timeout=30,
                )
                notes = lambda: [row.text for row in app.query(NoteRow)]  # noqa: E731
                await wait_until(pilot, lambda: any("/retry" in note for note in notes()))
                (said,) = [note for note in notes() if "/retry" in note]
                assert "no answer" in said
                await enter_line(pilot, "/retry")
                await wait_until(pilot, lambda: "One, two, three." in replies(app), timeout=30)
                assert users(app).count("count to three") == 1
        finally:
            await anyio.to_thread.run_sync(stop_service, home)


async def test_a_forget_made_while_no_service_ran_is_seen_at_the_next_connection(
    home: Path,
) -> None:
    fake = AnthropicFake(script().push(answer(f"Kept: {SECRET}."), answer("Back.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, f"remember {SECRET}")
        await wait_until(pilot, lambda: replies(app) == [f"Kept: {SECRET}."], timeout=20)
        await wait_until(pilot, lambda: not agent_of(app).busy)
        await stop_from_another_client(home)
        await wait_until(pilot, lambda: app.remote is None and app.paused is not None)
        # `evertalk memory forget` with no service: it works on the files itself
        argv = ["memory", "forget", "0-1", "--yes", "--home", str(home)]
        assert await anyio.to_thread.run_sync(main, argv) == 0
        assert SECRET in shown(app)
        await enter_line(pilot, "still there?")
        await wait_until(pilot, lambda: "Back." in replies(app), timeout=20)
        await wait_until(pilot, lambda: SECRET not in shown(app))
        assert users(app)[0].startswith("[forgotten on ")


async def test_a_window_that_opens_during_a_turn_shows_it_once_it_ended(home: Path) -> None:
    fake = AnthropicFake(script().push(slow(1.5, answer("Late but whole."))))
    async with (
        hosted(home, fake_opener(home, fake)) as host,
        listening(await host.connect(client="other")) as other,
    ):
        await other.send("asked elsewhere")
        with anyio.fail_after(10):
            while not turn_bodies(fake):
                await anyio.sleep(0.01)
        app = ChatApp(home, connector=host.connect, workdir=workdir_of(home))
        async with app.run_test(size=SIZE) as pilot:
            with anyio.fail_after(20):
                await app.ready.wait()
            await wait_until(pilot, lambda: "Late but whole." in replies(app), timeout=20)
            await wait_until(pilot, lambda: not app.busy)
            await pilot.pause(0.3)
            assert drawn(app) == [("user", "asked elsewhere"), ("ever", "Late but whole.")]
