"""The file tools stay where they belong (issue "Trust: nothing leaked"): `write` and `edit`
ask before they touch anything outside the working directory, symlinks and `..` resolved, even
when the tool is allowed; no file tool touches evertalk's home (the key is in its config.toml,
and the model reads its memory with zoom)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from evertalk.agent.permissions import Decision
from evertalk.agent.policy import DENIED, Policy
from evertalk.agent.tools import Toolbox, ToolContext, ToolOutcome
from evertalk.config import ToolPolicies

pytestmark = pytest.mark.anyio


class ScriptedAsker:
    """Answers in order, remembers what it was asked, and can do something while it is asked
    (the user reading the dialog, while another agent works)."""

    def __init__(self, *answers: Decision, meanwhile: Callable[[], None] | None = None) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.meanwhile = meanwhile

    async def ask(self, tool: str, tool_input: dict[str, Any]) -> Decision:
        self.asked.append((tool, dict(tool_input)))
        if self.meanwhile is not None:
            self.meanwhile()
        return self.answers.pop(0)


@pytest.fixture
def home(tmp_path: Path, ctx: ToolContext) -> Path:
    """evertalk's home, known to the tools."""
    folder = tmp_path / "evhome"
    folder.mkdir()
    (folder / "config.toml").write_text('api_key = "sk-secret-secret"\n')
    ctx.home = folder
    return folder


def allowing() -> Toolbox:
    """write and edit allowed by config (and read, the default): no one to ask."""
    return Toolbox(Policy(ToolPolicies(write="allow", edit="allow")), None)


def granted() -> Toolbox:
    return Toolbox(Policy(ToolPolicies(), granted=["write", "edit"]), None)


def asking(asker: ScriptedAsker, **rules: Any) -> Toolbox:
    policies = ToolPolicies(**({"write": "allow", "edit": "allow"} | rules))
    return Toolbox(Policy(policies, interactive=True), asker)


def assert_refused(outcome: ToolOutcome, *words: str) -> None:
    assert outcome.is_error and "\n" not in outcome.text, outcome.text
    for word in words:
        assert word in outcome.text, outcome.text


# -- write and edit: outside the working directory asks --------------------------------------


async def test_dot_dot_is_refused_headless_though_allowed(ctx: ToolContext, outside: Path) -> None:
    for toolbox in (allowing(), granted()):
        wrote = await toolbox.run("write", {"path": "../outside/new.txt", "content": "x"}, ctx)
        assert_refused(wrote, DENIED, str(outside / "new.txt"), "outside the working directory")
        edited = await toolbox.run(
            "edit", {"path": "../outside/victim.txt", "old": "precious", "new": "gone"}, ctx
        )
        assert_refused(edited, DENIED, str(outside / "victim.txt"))
    assert not (outside / "new.txt").exists()
    assert (outside / "victim.txt").read_text() == "precious\n"


async def test_an_absolute_path_outside_is_refused_inside_is_not(
    ctx: ToolContext, outside: Path
) -> None:
    wrote = await allowing().run("write", {"path": str(outside / "a.txt"), "content": "x"}, ctx)
    assert_refused(wrote, DENIED, str(outside / "a.txt"))
    inside = await allowing().run(
        "write", {"path": str(ctx.workdir / "a.txt"), "content": "x"}, ctx
    )
    assert not inside.is_error and (ctx.workdir / "a.txt").read_text() == "x"
    # `..` that comes back in is inside
    back = await allowing().run("write", {"path": "../work/b.txt", "content": "y"}, ctx)
    assert not back.is_error and (ctx.workdir / "b.txt").read_text() == "y"


async def test_a_symlink_inside_that_points_outside_is_refused(
    ctx: ToolContext, outside: Path
) -> None:
    (ctx.workdir / "link.txt").symlink_to(outside / "victim.txt")
    (ctx.workdir / "dangling").symlink_to(outside / "not-yet.txt")
    for path in ("link.txt", "dangling"):
        wrote = await allowing().run("write", {"path": path, "content": "owned"}, ctx)
        assert_refused(wrote, DENIED, str(outside))
    edited = await allowing().run(
        "edit", {"path": "link.txt", "old": "precious", "new": "owned"}, ctx
    )
    assert_refused(edited, DENIED, str(outside / "victim.txt"))
    assert (outside / "victim.txt").read_text() == "precious\n"
    assert not (outside / "not-yet.txt").exists()


async def test_a_new_file_under_a_symlinked_folder_is_refused(
    ctx: ToolContext, outside: Path
) -> None:
    (ctx.workdir / "sub").symlink_to(outside, target_is_directory=True)
    for path in ("sub/new.txt", "sub/deeper/new.txt"):
        wrote = await allowing().run("write", {"path": path, "content": "x"}, ctx)
        assert_refused(wrote, DENIED, str(outside / path.removeprefix("sub/")))
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]


async def test_the_question_names_the_resolved_path(ctx: ToolContext, outside: Path) -> None:
    (ctx.workdir / "link.txt").symlink_to(outside / "victim.txt")
    asker = ScriptedAsker("once", "deny")
    toolbox = asking(asker)
    first = await toolbox.run("write", {"path": "link.txt", "content": "approved\n"}, ctx)
    assert not first.is_error
    assert (outside / "victim.txt").read_text() == "approved\n"
    second = await toolbox.run(
        "edit", {"path": "link.txt", "old": "approved", "new": "refused"}, ctx
    )
    assert_refused(second, DENIED)
    assert (outside / "victim.txt").read_text() == "approved\n"
    assert [tool for tool, _ in asker.asked] == ["write", "edit"]
    for _, asked in asker.asked:
        assert asked["path"] == str(outside / "victim.txt")


async def test_always_outside_is_for_that_path(ctx: ToolContext, outside: Path) -> None:
    asker = ScriptedAsker("always", "deny")
    toolbox = asking(asker)
    target = str(outside / "a.txt")
    for content in ("1", "2"):
        outcome = await toolbox.run("write", {"path": target, "content": content}, ctx)
        assert not outcome.is_error
    other = await toolbox.run("write", {"path": str(outside / "b.txt"), "content": "x"}, ctx)
    assert_refused(other, DENIED)
    assert len(asker.asked) == 2
    assert (outside / "a.txt").read_text() == "2" and not (outside / "b.txt").exists()


async def test_always_for_the_tool_does_not_reach_outside(ctx: ToolContext, outside: Path) -> None:
    asker = ScriptedAsker("always", "deny")
    toolbox = asking(asker, write="ask")
    assert not (await toolbox.run("write", {"path": "in.txt", "content": "x"}, ctx)).is_error
    assert not (await toolbox.run("write", {"path": "in2.txt", "content": "x"}, ctx)).is_error
    out = await toolbox.run("write", {"path": str(outside / "o.txt"), "content": "x"}, ctx)
    assert_refused(out, DENIED)
    assert [asked["path"] for _, asked in asker.asked] == ["in.txt", str(outside / "o.txt")]


async def test_deny_in_config_is_not_asked_outside(ctx: ToolContext, outside: Path) -> None:
    asker = ScriptedAsker("always")
    toolbox = asking(asker, write="deny")
    out = await toolbox.run("write", {"path": str(outside / "o.txt"), "content": "x"}, ctx)
    assert_refused(out, DENIED, "deny")
    assert asker.asked == []


async def test_a_link_moved_while_the_user_answers_is_refused(
    ctx: ToolContext, outside: Path
) -> None:
    """The user allowed the path the question named; a link switched meanwhile (by a subagent's
    command) to another place does not carry that answer there."""
    link = ctx.workdir / "link.txt"
    link.symlink_to(outside / "victim.txt")
    (outside / "other.txt").write_text("other\n")

    def switch() -> None:
        link.unlink()
        link.symlink_to(outside / "other.txt")

    asker = ScriptedAsker("once", meanwhile=switch)
    outcome = await asking(asker).run("write", {"path": "link.txt", "content": "x"}, ctx)
    assert_refused(outcome, str(outside / "other.txt"))
    assert (outside / "victim.txt").read_text() == "precious\n"
    assert (outside / "other.txt").read_text() == "other\n"


async def test_a_link_moved_out_after_the_check_is_refused(ctx: ToolContext, outside: Path) -> None:
    """A write inside needs no question when allowed; if the path leads outside by the time it
    runs (an `ask` for another tool in between), it is refused rather than followed."""
    (ctx.workdir / "target.txt").write_text("mine\n")
    link = ctx.workdir / "link.txt"
    link.symlink_to(ctx.workdir / "target.txt")

    def switch() -> None:
        link.unlink()
        link.symlink_to(outside / "victim.txt")

    asker = ScriptedAsker("once", meanwhile=switch)
    outcome = await asking(asker, edit="ask").run(
        "edit", {"path": "link.txt", "old": "mine", "new": "yours"}, ctx
    )
    assert_refused(outcome, "outside the working directory", str(outside / "victim.txt"))
    assert (outside / "victim.txt").read_text() == "precious\n"


# -- read --------------------------------------------------------------------------------------


async def test_read_outside_is_allowed_by_the_default_rule(ctx: ToolContext, outside: Path) -> None:
    outcome = await Toolbox(Policy(ToolPolicies()), None).run(
        "read", {"path": "../outside/victim.txt"}, ctx
    )
    assert outcome.text == "precious\n"


async def test_read_under_ask_names_the_resolved_path(ctx: ToolContext, outside: Path) -> None:
    (ctx.workdir / "inside.txt").write_text("in\n")
    (ctx.workdir / "link.txt").symlink_to(outside / "victim.txt")
    asker = ScriptedAsker("once", "once")
    toolbox = Toolbox(Policy(ToolPolicies(read="ask"), interactive=True), asker)
    assert (await toolbox.run("read", {"path": "inside.txt"}, ctx)).text == "in\n"
    assert (await toolbox.run("read", {"path": "link.txt"}, ctx)).text == "precious\n"
    assert [asked["path"] for _, asked in asker.asked] == [
        "inside.txt",
        str(outside / "victim.txt"),
    ]


# -- evertalk's home ---------------------------------------------------------------------------


async def test_no_file_tool_touches_the_home(ctx: ToolContext, home: Path) -> None:
    (ctx.workdir / "cfg").symlink_to(home / "config.toml")
    (ctx.workdir / "homedir").symlink_to(home, target_is_directory=True)
    asker = ScriptedAsker()  # never asked: the answer could only be no
    toolbox = Toolbox(Policy(ToolPolicies(write="allow", edit="allow"), interactive=True), asker)
    for path in (str(home / "config.toml"), "cfg", "homedir/config.toml", "../evhome/x"):
        read = await toolbox.run("read", {"path": path}, ctx)
        assert_refused(read, "evertalk's home", "zoom")
        assert "sk-secret" not in read.text
        wrote = await toolbox.run("write", {"path": path, "content": "[tools]\n"}, ctx)
        assert_refused(wrote, "evertalk's home")
        edited = await toolbox.run("edit", {"path": path, "old": "api", "new": "x"}, ctx)
        assert_refused(edited, "evertalk's home")
    assert asker.asked == []
    assert (home / "config.toml").read_text() == 'api_key = "sk-secret-secret"\n'
    assert sorted(p.name for p in home.iterdir()) == ["config.toml"]


async def test_the_home_is_refused_through_a_symlinked_home(
    ctx: ToolContext, home: Path, tmp_path: Path
) -> None:
    """evertalk started with --home through a link: the real folder is refused all the same."""
    (tmp_path / "home-link").symlink_to(home, target_is_directory=True)
    linked = replace(ctx, home=tmp_path / "home-link")
    read = await allowing().run("read", {"path": str(home / "config.toml")}, linked)
    assert_refused(read, "evertalk's home")
