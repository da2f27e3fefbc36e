"""`evertalk store push URL` and `evertalk store pull URL DIR` as a user runs them: a chat of
10,000 messages goes to the database and comes back the same, a push stopped midway goes on
where it stopped, a push that is done points the home at the database (`[store] url`) and one
that is not leaves config.toml as it was, and every refusal is one line that never shows the
password."""

from __future__ import annotations

import io
import json
import os
import random
import socket
import subprocess
import sys
import tomllib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from evertalk.chat import Chat
from evertalk.cli import main
from evertalk.config import load_config
from evertalk.memory.text import MESSAGE_LIMIT
from evertalk.pgstore import transfer
from evertalk.pgstore.connect import connect
from evertalk.pgstore.pgchat import PgChat
from evertalk.pgstore.schema import KNOWN
from evertalk.pgstore.url import parse_url
from evertalk.store.chat_dir import ChatStore
from evertalk.store.records import NodeRecord
from evertalk.store.views import VIEW_NAME, load_views
from pg_server import PgServer

MESSAGES = 10_000
SECRET = "s3cretpw"
WORDS = ("disk", "quota", "backup", "nightly", "rotate", "cron", "mirror", "tarball", "fixed")
START = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)

CUT_OFF = "running the same command again goes on where it stopped"
MINE = """\
# my settings
model = "claude-opus-5-5"   # the one I like

[tools]
shell = "allow"
"""
"""A home's config.toml as its user wrote it."""


# The chats


def write_chat(chat_dir: Path, count: int, *, seed: int = 11) -> None:
    """`count` records as a chat in use logs them (each a page: a long message is several),
    with keys, image names, a subagent's messages and failed ones, then every node built as
    the compactor would, two of them cut, and the views merged down."""
    rng = random.Random(seed)
    with Chat.open(chat_dir) as chat:
        with chat.one_sync():
            k = 0
            while chat.t < count:
                kind = ("user", "ever", "tool", "echo")[k % 4]
                size = MESSAGE_LIMIT * 2 // 5 if k % 900 == 7 else rng.choice((3, 12, 60, 110))
                text = " ".join(rng.choices(WORDS, k=size))  # the long ones: three pages
                if chat.t + len(text) // MESSAGE_LIMIT + 1 > count:
                    text = text[:200]
                chat.append(
                    kind,
                    text,
                    key=f"m{k}" if k % 3 == 0 else None,
                    images=[f"shot-{k}.png"] if k % 50 == 1 else None,
                    agent="helper" if k % 70 == 9 else None,
                    date=START + timedelta(minutes=7 * k),
                    failed=k % 333 == 5,
                )
                k += 1
        cuts = 2
        while True:
            while ready := chat.core.ready():
                for node in ready:
                    if cuts and node[0] > 0:
                        chat.cut(node)
                        cuts -= 1
                    else:
                        words = " ".join(rng.choices(WORDS, k=rng.randrange(4, 14)))
                        chat.build(node, f"summary of {node[0]}+{node[1]}: {words}")
            if not chat.resume_batch():
                break


@pytest.fixture(scope="session")
def big_chat(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home whose chat holds 10,000 messages, written once for the session. The commands
    only read the chat (a push opens it read-only)."""
    home = tmp_path_factory.mktemp("big-home")
    write_chat(home / "chat", MESSAGES)
    return home


@pytest.fixture
def big_home(big_chat: Path) -> Path:
    """`big_chat` with no config.toml: a push of an earlier test set it to that test's
    database, which another push would be refused for."""
    (big_chat / "config.toml").unlink(missing_ok=True)
    return big_chat


def small_home(home: Path, count: int = 40, *, seed: int = 11) -> Path:
    write_chat(home / "chat", count, seed=seed)
    return home


def built_nodes(store: ChatStore) -> list[NodeRecord]:
    found = []
    for level, flags in enumerate(store.node_flags()):
        for index, flag in enumerate(flags):
            if flag:
                node = store.read_node(level, index)
                assert node is not None
                found.append(node)
    return found


def assert_same_chat(one: Path, other: Path) -> None:
    """Every message record, every node record and the saved views are the same."""
    with (
        ChatStore.open(one, create=False, readonly=True) as first,
        ChatStore.open(other, create=False, readonly=True) as second,
    ):
        assert second.message_count == first.message_count
        for i in range(first.message_count):
            assert second.read_message(i) == first.read_message(i)
        assert second.node_flags() == first.node_flags()
        assert built_nodes(second) == built_nodes(first)
    assert (other / VIEW_NAME).read_bytes() == (one / VIEW_NAME).read_bytes()


def assert_database_holds(url: str, chat_dir: Path) -> None:
    """The database chat at `url` is the file chat at `chat_dir`, record for record."""
    conn = connect(url)
    try:
        chat = PgChat.open(conn, machine="test", create=False)
        with ChatStore.open(chat_dir, create=False, readonly=True) as store:
            count = store.message_count
            assert chat.message_count == count
            for start in range(0, count, 1000):
                stop = min(start + 1000, count)
                expected = [store.read_message(i) for i in range(start, stop)]
                assert chat.read_messages(start, stop) == expected
            nodes: list[NodeRecord] = []
            while more := chat.read_nodes((nodes[-1].l, nodes[-1].i) if nodes else (-1, -1), 5000):
                nodes += more
            assert nodes == built_nodes(store)
        assert chat.load_views() == load_views(chat_dir)
    finally:
        conn.close()


# Running the command


def evertalk(*words: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`evertalk [--home HOME] WORDS…` in a new process, as a user runs it."""
    env = {name: value for name, value in os.environ.items() if name != "EVERTALK_HOME"}
    where = ["--home", str(home)] if home is not None else []
    return subprocess.run(
        [sys.executable, "-m", "evertalk", *where, *words],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def closed_port() -> int:
    """A loopback port nothing listens on (it was free a moment ago)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def secret_url(port: int) -> str:
    return f"postgresql://someone:{SECRET}@127.0.0.1:{port}/notes"


def shown_url(pg_url: str) -> str:
    """`pg_url` as the command prints it: no password."""
    return "postgresql://postgres@" + pg_url.split("@", 1)[1]


def assert_refused(code: int, out: str, err: str, *hidden: str) -> str:
    """A refusal: exit status 1, nothing on standard output and one line on standard error
    that starts with `evertalk: ` and holds none of `hidden`; that line."""
    assert code == 1, err
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("evertalk: ")
    for secret in (SECRET, *hidden):
        assert secret not in err
    return lines[0]


# Push and pull


@pytest.mark.slow
def test_push_then_pull_gives_the_same_chat(
    big_home: Path, pg_server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    with ChatStore.open(big_home / "chat", create=False, readonly=True) as store:
        nodes = len(built_nodes(store))
    shown = shown_url(pg_url)

    pushed = evertalk("store", "push", pg_url, home=big_home)
    assert pushed.returncode == 0, pushed.stderr
    first, second = pushed.stdout.splitlines()
    assert first == f"copied 10,000 messages, {nodes:,} summaries and the views to {shown}"
    assert second == f"this home now uses {shown}: [store] url in {big_home / 'config.toml'}"
    assert pushed.stderr == ""  # not a terminal: no progress lines
    assert_database_holds(pg_url, big_home / "chat")

    again = evertalk("store", "push", pg_url, home=big_home)
    assert again.returncode == 0, again.stderr
    said = f"nothing to copy: {shown} holds all 10,000 messages of this chat already"
    assert again.stdout.splitlines()[0] == said

    pulled = evertalk("store", "pull", pg_url, str(tmp_path / "pulled"))
    assert pulled.returncode == 0, pulled.stderr
    back = tmp_path / "pulled" / "chat"
    assert pulled.stdout.splitlines() == [
        f"wrote 10,000 messages, {nodes:,} summaries and the views from {shown} into {back}",
        f"`evertalk --home {tmp_path / 'pulled'}` opens it",
    ]
    assert back.stat().st_mode & 0o777 == 0o700
    assert_same_chat(big_home / "chat", back)

    status = evertalk("memory", "status", "--json", home=tmp_path / "pulled")
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["messages"] == MESSAGES and report["unbuilt"] == 0 and report["cut"] == 2

    for run in (pushed, again, pulled, status):
        assert pg_server.password not in run.stdout + run.stderr


def test_an_interrupted_push_goes_on_where_it_stopped(
    big_home: Path,
    pg_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Ctrl+C during the messages, then during the summaries; the next push copies the rest."""
    real_push = transfer.push

    def stopping_at(stage: str, count: int) -> Callable[..., transfer.Copied]:
        def push(source: Path, target: PgChat, **options: Any) -> transfer.Copied:
            shown = options["progress"]

            def progress(step: str, done: int, total: int) -> None:
                shown(step, done, total)
                if step == stage and done >= count:
                    raise KeyboardInterrupt

            return real_push(source, target, progress=progress, batch=1000)

        return push

    monkeypatch.setattr(transfer, "push", stopping_at("messages", 3000))
    assert main(["--home", str(big_home), "store", "push", pg_url]) == 130
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"evertalk: stopped (3,000 messages are in the database): {CUT_OFF}"
    ]

    monkeypatch.setattr(transfer, "push", stopping_at("nodes", 2000))
    assert main(["--home", str(big_home), "store", "push", pg_url]) == 130
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        f"evertalk: stopped (10,000 messages are in the database): {CUT_OFF}"
    ]

    assert not (big_home / "config.toml").exists()  # a push cut off sets nothing

    monkeypatch.undo()
    rest = evertalk("store", "push", pg_url, home=big_home)
    assert rest.returncode == 0, rest.stderr
    with ChatStore.open(big_home / "chat", create=False, readonly=True) as store:
        nodes = len(built_nodes(store))
    copied = f"copied {nodes - 2000:,} summaries and the views to {shown_url(pg_url)}"
    assert rest.stdout.splitlines()[0] == copied  # the messages were all in
    assert_database_holds(pg_url, big_home / "chat")


def test_a_stopped_pull_leaves_no_part_behind(
    tmp_path: Path,
    pg_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = small_home(tmp_path / "home", 60)
    assert main(["--home", str(home), "store", "push", pg_url]) == 0
    real_pull = transfer.pull

    def pull(source: PgChat, target: Path, **options: Any) -> transfer.Copied:
        def progress(step: str, done: int, total: int) -> None:
            raise KeyboardInterrupt

        return real_pull(source, target, progress=progress, batch=20)

    monkeypatch.setattr(transfer, "pull", pull)
    capsys.readouterr()
    new = tmp_path / "new"
    assert main(["store", "pull", pg_url, str(new)]) == 130
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1
    assert err.startswith(f"evertalk: stopped, and the part written to {new / 'chat'} was removed")
    assert not (new / "chat").exists()

    monkeypatch.undo()
    assert main(["store", "pull", pg_url, str(new)]) == 0
    assert_same_chat(home / "chat", new / "chat")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_is_one_line_per_stage(
    tmp_path: Path,
    pg_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = small_home(tmp_path / "home", 2500)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["--home", str(home), "store", "push", pg_url]) == 0
    lines = terminal.getvalue().split("\n")
    assert lines[-1] == ""  # the last stage's line is ended
    messages, nodes = lines[:-1]
    # each redraw starts the line again: messages in batches of 1,000, then the summaries
    draws = [draw for draw in messages.split("\r\x1b[K") if draw]
    assert [draw.split("] ")[1] for draw in draws] == [
        "messages 1,000/2,500",
        "messages 2,000/2,500",
        "messages 2,500/2,500",
    ]
    assert draws[-1].startswith("[" + "#" * 24 + "]")
    assert nodes.startswith("\r\x1b[K[") and " summaries " in nodes
    assert capsys.readouterr().out.startswith("copied 2,500 messages, ")


# Refusals


def test_refusals_without_a_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = small_home(tmp_path / "home")
    port = closed_port()
    cases = [
        # no chat in the home
        (["--home", str(tmp_path / "empty"), "store", "push", secret_url(port)], "no chat in"),
        # not a postgresql:// URL
        (["--home", str(home), "store", "push", f"mysql://u:{SECRET}@h/db"], "not a postgresql"),
        (["store", "pull", f"postgresql://u:{SECRET}@h:port/db", str(tmp_path / "new")], "port"),
        (["store", "pull", f"u:{SECRET}@h/db", str(tmp_path / "new")], "not a postgresql"),
        (["--home", str(home), "store", "push", secret_url(port) + " x"], "`store.url` must be"),
        # nothing listens there
        (["--home", str(home), "store", "push", secret_url(port)], "cannot reach the database"),
        (["store", "pull", secret_url(port), str(tmp_path / "new")], "cannot reach"),
    ]
    for words, says in cases:
        code = main(words)
        out, err = capsys.readouterr()
        assert says in assert_refused(code, out, err), words
    assert not (tmp_path / "new").exists()  # a refused pull writes nothing
    assert not (tmp_path / "empty").exists()
    assert not (home / "config.toml").exists()  # nor does a refused push


def test_refusals_of_a_database(
    tmp_path: Path, pg_server: PgServer, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = small_home(tmp_path / "mine", seed=1)
    theirs = small_home(tmp_path / "theirs", seed=2)
    assert main(["--home", str(theirs), "store", "push", pg_url]) == 0
    capsys.readouterr()

    (mine / "config.toml").write_text(MINE)
    code = main(["--home", str(mine), "store", "push", pg_url])
    line = assert_refused(code, *capsys.readouterr(), pg_server.password)
    assert " differs between the database chat and the chat at " in line
    assert line.endswith(": it is another chat")
    assert (mine / "config.toml").read_text() == MINE  # a failed push sets nothing

    taken = tmp_path / "taken"
    (taken / "chat").mkdir(parents=True)
    (taken / "chat" / "notes.txt").write_text("mine")
    code = main(["store", "pull", pg_url, str(taken)])
    line = assert_refused(code, *capsys.readouterr(), pg_server.password)
    assert line == f"evertalk: {taken / 'chat'} is not empty: store pull writes a new chat"
    assert (taken / "chat" / "notes.txt").read_text() == "mine"

    empty = pg_server.create_database(f"t_{uuid4().hex[:12]}")
    code = main(["store", "pull", empty, str(tmp_path / "new")])
    line = assert_refused(code, *capsys.readouterr(), pg_server.password)
    assert line.endswith("there is no chat 'main' in the database")
    assert not (tmp_path / "new" / "chat").exists()

    wrong = pg_url.replace(pg_server.password, "not-the-password")
    code = main(["--home", str(mine), "store", "push", wrong])
    line = assert_refused(code, *capsys.readouterr(), pg_server.password, "not-the-password")
    assert "password authentication failed" in line
    assert (mine / "config.toml").read_text() == MINE


def test_init_readies_a_database_for_several_people(
    pg_server: PgServer, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tag = uuid4().hex[:8]
    owner, ann, bob = f"owner_{tag}", f"ann_{tag}", f"bob_{tag}"
    for role in (ann, bob):
        pg_server.create_role(role)
    shown = parse_url(pg_url).shown
    people = f"may use it, each seeing only their own chats: {ann}, {bob}"
    assert main(["store", "init", pg_url, "--owner", owner, "--grant", ann, "--grant", bob]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        f"made the role {owner}, which no one can log in as, to own evertalk's schema",
        f"evertalk's schema at {shown} is at version {KNOWN}, owned by {owner},"
        f" brought up by {KNOWN} migrations",
        people,
    ]
    assert err == "" and pg_server.password not in out

    assert main(["store", "init", pg_url, "--owner", owner]) == 0  # again: nothing to do
    out, _ = capsys.readouterr()
    assert out.splitlines() == [
        f"evertalk's schema at {shown} is at version {KNOWN}, owned by {owner}",
        people,
    ]
    code = main(["store", "init", pg_url, "--owner", owner, "--grant", f"nobody_{tag}"])
    line = assert_refused(code, *capsys.readouterr(), pg_server.password)
    assert line == f"evertalk: there is no role nobody_{tag} in the database at {shown}"


# The home's config.toml


def test_a_push_points_the_home_at_the_database(
    tmp_path: Path, pg_server: PgServer, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    home = small_home(tmp_path / "home")
    config = home / "config.toml"
    config.write_text(MINE)
    config.chmod(0o644)

    assert main(["--home", str(home), "store", "push", pg_url]) == 0
    out, err = capsys.readouterr()
    said = f"this home now uses {shown_url(pg_url)}: [store] url in {config}"
    assert out.splitlines()[-1] == said
    assert pg_server.password not in out + err
    text = config.read_text()
    assert text.startswith(MINE)  # every line and comment kept, the table added after them
    assert tomllib.loads(text) == {**tomllib.loads(MINE), "store": {"url": pg_url}}
    assert config.stat().st_mode & 0o777 == 0o600
    assert load_config(home, {}).store_url == pg_url

    # again, to the same database: nothing to change
    assert main(["--home", str(home), "store", "push", pg_url]) == 0
    assert config.read_text() == text


def test_a_home_set_to_another_database_is_refused_before_copying(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing listens at the URL given: the refusal is the config's, so no copy was tried."""
    home = small_home(tmp_path / "home")
    config = home / "config.toml"
    other = f"postgresql://other:{SECRET}@elsewhere.example/notes"
    config.write_text(f'{MINE}\n[store]\nurl = "{other}"\n')
    config.chmod(0o600)  # it holds a password: made private at the first load otherwise
    before = config.read_bytes()
    target = secret_url(closed_port())

    code = main(["--home", str(home), "store", "push", target])
    line = assert_refused(code, *capsys.readouterr())
    assert line == (
        f"evertalk: this home uses postgresql://other@elsewhere.example/notes ([store] url in"
        f" {config}): remove that line to push to postgresql://someone@{target.split('@')[1]}"
    )
    assert config.read_bytes() == before

    config.write_text("model = \n")  # a file that cannot be read: refused before copying too
    code = main(["--home", str(home), "store", "push", target])
    assert "not valid TOML" in assert_refused(code, *capsys.readouterr())


# What other commands load


LOADED = """
import contextlib, io, json, sys
from evertalk.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(["memory", "status", "--home", sys.argv[1]])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def test_memory_status_does_not_load_the_database_driver(tmp_path: Path) -> None:
    home = small_home(tmp_path / "home", 10)
    done = subprocess.run(
        [sys.executable, "-c", LOADED, str(home)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["code"] == 0
    modules: list[str] = result["modules"]
    assert "evertalk.store_cli" in modules  # the parser knows `store`…
    loaded = [name for name in modules if name.split(".")[0] == "psycopg"]
    loaded += [name for name in modules if name.startswith("evertalk.pgstore")]
    assert loaded == []  # …and nothing of the database is loaded for it


def test_after_a_push_the_read_commands_read_the_database(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    home = small_home(tmp_path / "home")
    with Chat.open(home / "chat", readonly=True) as chat:
        before = chat.status()
        view = chat.render_view()
        zoomed = chat.zoom(7, 1)
    assert main(["--home", str(home), "store", "push", pg_url]) == 0
    capsys.readouterr()
    status = evertalk("memory", "status", "--json", home=home)
    assert status.returncode == 0, status.stderr
    found = json.loads(status.stdout)
    assert (found["messages"], found["view_lines"]) == (before.messages, before.view_lines)
    shown = evertalk("memory", "view", home=home)
    assert shown.returncode == 0 and shown.stdout.strip() == view.strip()
    zoom = evertalk("memory", "zoom", "7", "1", home=home)
    assert zoom.returncode == 0 and zoom.stdout.strip() == zoomed.strip()
    # what reads the chat's files says in one line why it does not run here
    for words in (
        ("memory", "forget", "3", "--yes"),
        ("memory", "search", "word"),
        ("memory", "repair"),
    ):
        refused = evertalk(*words, home=home)
        assert refused.returncode != 0 and refused.stderr.count("\n") == 1, refused.stderr
        assert "kept in files" in refused.stderr and "store pull" in refused.stderr
