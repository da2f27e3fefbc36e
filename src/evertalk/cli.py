"""The command line: `evertalk` (the terminal app), `evertalk -p`, `evertalk memory …` and
`evertalk usage`.

Imports are lazy so start-up stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evertalk import __version__, store_cli, undo_cli
from evertalk.home import default_home


class UsageError(Exception):
    """Wrong arguments or a missing chat: one line for the user, exit status 2."""


NO_MESSAGE = "\0"
"""What `-p` holds when no MESSAGE follows it (`-p --retry`): a NUL, which no argument can hold,
so that `-p ""` stays an empty message."""


RETRY_TAKES_NO_MESSAGE = "--retry takes no MESSAGE: it sends the last unanswered one again"


def terminal_columns(fallback: int = 80) -> int:
    """The width `shutil.get_terminal_size().columns` gives: COLUMNS when it is a positive
    number, else the width of the terminal that standard output was at start, else `fallback`."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        stdout = sys.__stdout__
        size = os.get_terminal_size(stdout.fileno()) if stdout is not None else None
    except (AttributeError, ValueError, OSError):
        size = None
    return (size.columns if size is not None else 0) or fallback


class _Formatter(argparse.HelpFormatter):
    """argparse's layout of help and usage, as wide as argparse makes it (the terminal's width
    less 2), the width found without shutil: argparse loads that module for it alone, and with
    it three compression libraries, 2 ms of every command."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        width = terminal_columns() - 2 if width is None else width
        super().__init__(prog, indent_increment, max_help_position, width)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


class _Command(_Parser):
    """A subcommand's parser: each takes `--home` after its name too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument("--home", type=Path, default=argparse.SUPPRESS)


def _with_json(command: argparse.ArgumentParser) -> None:
    command.add_argument("--json", action="store_true", help="one JSON object, for programs")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="evertalk", description="An AI agent with one chat that never ends.")
    parser.add_argument("--version", action="version", version=f"evertalk {__version__}")
    parser.add_argument("--home", type=Path, help="the evertalk folder (default ~/.evertalk)")
    parser.add_argument(
        "-p",
        "--print",
        dest="prompt",
        metavar="MESSAGE",
        nargs="?",
        const=NO_MESSAGE,  # `-p --retry`: the message is the one already logged
        help="answer MESSAGE in one turn without the terminal app and print the reply "
        "('-' reads the message from standard input)",
    )
    parser.add_argument(
        "--retry",
        action="store_true",
        help="with -p and no MESSAGE: run the turn again for the last message that has no "
        "reply (its turn failed), without sending it twice",
    )
    parser.add_argument(
        "--json", dest="json_events", action="store_true", help="with -p: print every event as JSON"
    )
    parser.add_argument(
        "--raw",
        action="store_true",
        help="with -p: write the reply's control characters as they are, to a terminal too "
        "(else a terminal shows them escaped)",
    )
    parser.add_argument(
        "--allow",
        metavar="TOOLS",
        help="with -p: let these tools run without asking, e.g. shell,write,edit",
    )
    parser.add_argument(
        "--image",
        dest="images",
        metavar="FILE",
        type=Path,
        action="append",
        help="with -p: attach an image (PNG, JPEG, GIF or WebP) to the message; repeatable",
    )
    parser.add_argument(
        "--model",
        metavar="NAME",
        help="with -p MESSAGE: run this turn on the model NAME (config.toml is left as it is)",
    )
    parser.add_argument(
        "--over-budget",
        action="store_true",
        help="with -p: run the turn though today's spending is past [budget] daily",
    )
    parser.add_argument(
        "--now",
        action="store_true",
        help="with -p MESSAGE: start the turn at once when the chat is behind, with the "
        "summaries built so far, instead of waiting for them to catch up",
    )
    parser.add_argument(
        "--workdir",
        metavar="DIR",
        type=Path,
        help="where the tools work (default: workdir in config.toml, else the current folder)",
    )
    commands = parser.add_subparsers(dest="command", parser_class=_Command)
    memory = commands.add_parser("memory", help="look at the chat's memory")
    actions = memory.add_subparsers(dest="action", parser_class=_Command)
    _with_json(actions.add_parser("status", help="counts and sizes"))
    actions.add_parser("view", help="the rendered view")
    zoom = actions.add_parser("zoom", help="the two lines a node was built from, or a message")
    zoom.add_argument("id", type=int)
    zoom.add_argument("n", type=int)
    date = actions.add_parser("date", help="when a message was written")
    date.add_argument("id", type=int)
    search = actions.add_parser("search", help="find words in every message and summary")
    search.add_argument("query", nargs="+", help="the words (tried as a phrase first)")
    search.add_argument("--limit", type=int, default=10, help="most hits shown (default 10)")
    _with_json(search)
    browse = actions.add_parser("browse", help="a read-only page of the memory in the browser")
    browse.add_argument("--out", type=Path, help="write one self-contained HTML file instead")
    browse.add_argument("--no-open", action="store_true", help="print the URL, open no browser")
    browse.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any)")
    actions.add_parser("compact", help="build every summary that needs a model call")
    actions.add_parser(
        "repair", help="put a note in place of each message the log cannot read (copies first)"
    )
    forget = actions.add_parser("forget", help="take messages A-B out of the whole memory")
    forget.add_argument("range", metavar="A[-B]", help="a message id, or a range of ids")
    forget.add_argument("--reason", help="said in the text that replaces them")
    forget.add_argument("--yes", action="store_true", help="forget without asking first")
    redact = actions.add_parser("redact", help="take a string out of every message and summary")
    redact.add_argument("text", help="the string (each occurrence becomes [redacted])")
    redact.add_argument("--regex", action="store_true", help="TEXT is a regular expression")
    redact.add_argument("--yes", action="store_true", help="redact without asking first")
    replay = actions.add_parser("replay", help="the conformance replay (SPEC Appendix A)")
    for flag, value in (
        ("--ceiling", 128_000),
        ("--floor", 64_000),
        ("--cceiling", 32_000),
        ("--cfloor", 16_000),
        ("--window", 8),
    ):
        replay.add_argument(flag, type=int, default=value)
    serve = commands.add_parser(
        "serve", help="start the service that owns the chat (in the background)"
    )
    serve.add_argument(
        "--foreground", action="store_true", help="run it here (for systemd or launchd)"
    )
    serve.add_argument(
        "--idle", type=float, metavar="SECONDS", help="exit after this long with nothing to do"
    )
    service = commands.add_parser("service", help="the running service: status, stop")
    service_actions = service.add_subparsers(dest="action", parser_class=_Command)
    _with_json(service_actions.add_parser("status", help="whether it runs, and what it does"))
    service_actions.add_parser("stop", help="stop it (summaries in flight land)")
    _with_json(
        commands.add_parser("usage", help="what the model calls cost: tokens, cache, dollars")
    )
    imports = commands.add_parser(
        "import", help="other agents' history (Claude Code, Codex, ChatGPT, JSON Lines)"
    )
    imports.add_argument("paths", nargs="+", metavar="PATH", help="files, folders or an export zip")
    imports.add_argument("--yes", action="store_true", help="import without asking first")
    commands.add_parser(
        "capture", help="a hook for Claude Code: its session lands in the chat as it happens"
    )
    mcp = commands.add_parser(
        "mcp",
        help="alone: serve the memory to other agents (MCP over stdio); add, list, remove: "
        "the MCP servers whose tools Ever may call",
    )
    _mcp_actions(mcp)
    _bench_actions(commands.add_parser("bench", help="measure the memory: evertalk bench recall"))
    undo_cli.add_parser(commands)
    store_cli.add_parser(commands)
    return parser


def _bench_actions(bench: argparse.ArgumentParser) -> None:
    """`evertalk bench recall` (`recall/command.py`, SPEC §14)."""
    actions = bench.add_subparsers(dest="action", parser_class=_Command)
    recall = actions.add_parser(
        "recall", help="what the memory lets Ever recall, and at what cost, in a scratch home"
    )
    recall.add_argument("--messages", type=int, default=2_000, metavar="N", help="default 2000")
    recall.add_argument("--facts", type=int, default=40, metavar="K", help="default 40")
    recall.add_argument("--seed", type=int, default=1, metavar="S", help="default 1")
    recall.add_argument(
        "--baseline-bytes", type=int, metavar="W", help="the baseline's log (default: view ceiling)"
    )
    recall.add_argument("--json", action="store_true", help="the report as one JSON object")
    recall.add_argument(
        "--out", type=Path, metavar="DIR", help="write the chat, questions, report and SVG"
    )
    recall.add_argument("--keep", action="store_true", help="keep the scratch home")
    recall.add_argument("--model", dest="bench_model", metavar="M", help="the turn model")
    recall.add_argument("--memory-model", dest="bench_memory_model", metavar="M")
    recall.add_argument("--dataset", type=Path, metavar="FILE", help="a LongMemEval data file")


def _mcp_actions(mcp: argparse.ArgumentParser) -> None:
    """`evertalk mcp add|list|remove` (`mcp_cli.py`)."""
    actions = mcp.add_subparsers(dest="action", parser_class=_Command)
    add = actions.add_parser("add", help="add a server: NAME -- COMMAND ARGS…, or NAME --url URL")
    add.add_argument("name", metavar="NAME", help="its tools reach the model as NAME__tool")
    add.add_argument("command_line", nargs="*", metavar="COMMAND", help="after --: how to start it")
    add.add_argument("--url", help="a server that listens (streamable HTTP)")
    add.add_argument(
        "--env", "-e", action="append", metavar="NAME=VALUE", help="a variable it starts with"
    )
    actions.add_parser("list", help="the configured servers")
    remove = actions.add_parser("remove", help="take a server out of config.toml")
    remove.add_argument("name", metavar="NAME")


def entry() -> int:
    """The command as a process runs it: its credentials sealed away first (`secret_env`), so
    that no command of a tool can read them from this process; `main` is the rest."""
    from evertalk.secret_env import seal

    seal()
    return main()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        words = list(sys.argv[1:] if argv is None else argv)
        words, command_line = _server_command(words)
        parser = build_parser()
        words, message = _message(parser, words)
        try:
            args = parser.parse_args(words)
        except UsageError as error:
            raise _unquoted(words) or error from None
        if command_line is not None:
            args.command_line = command_line
        args.message = message
        return _dispatch(args)
    except UsageError as error:
        print(
            f"evertalk: {error}" if not str(error).startswith("evertalk") else error,
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `evertalk memory view | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _message(parser: argparse.ArgumentParser, words: list[str]) -> tuple[list[str], str | None]:
    """`evertalk "MESSAGE"`: the message the app sends once open, taken out of the words."""
    from evertalk.cli_message import MessageError, split_message

    try:
        return split_message(parser, words)
    except MessageError as error:
        raise UsageError(str(error)) from None


def _server_command(words: list[str]) -> tuple[list[str], list[str] | None]:
    """`mcp add NAME [options] -- COMMAND ARGS…`: the words after `--` are the server's command
    line, taken apart before parsing (argparse would read its options as evertalk's)."""
    split = words.index("--") if "--" in words else 0
    if not any(words[i : i + 2] == ["mcp", "add"] for i in range(split)):
        return words, None
    return words[:split], words[split + 1 :]


def _unquoted(words: list[str]) -> UsageError | None:
    """`evertalk -p what is this`: the shell split the message into words, and the words after
    the first read as a command. Say so, rather than name a command nobody meant. With
    `--retry` (`-p --retry "msg"`), the word left over is a message that a retry does not take."""
    if "--retry" in words and {"-p", "--print"} & set(words):
        return UsageError(RETRY_TAKES_NO_MESSAGE)
    for flag in ("-p", "--print"):
        if flag in words[:-2] and not words[words.index(flag) + 2].startswith("-"):
            return UsageError(f"{flag} takes the message as one argument: put it in quotes")
    return None


def _dispatch(args: argparse.Namespace) -> int:
    if args.workdir is not None:
        if args.command is not None:
            raise UsageError("--workdir goes with evertalk itself or with -p MESSAGE")
        args.workdir = _workdir(args.workdir)
    if args.prompt is not None:
        return _headless(args)
    if args.retry:
        raise UsageError("--retry goes with -p: evertalk -p --retry")
    if args.json_events or args.allow is not None or args.images or args.model is not None:
        raise UsageError("--json, --allow, --image and --model go with -p MESSAGE")
    if args.over_budget:
        raise UsageError("--over-budget goes with -p")
    if args.now:
        raise UsageError("--now goes with -p MESSAGE")
    if args.raw:
        raise UsageError("--raw goes with -p")
    if args.command in ("serve", "service"):
        from evertalk.service_cli import run_service_command

        return run_service_command(args, args.home or default_home())
    if args.command == "bench":
        if args.action is None:
            raise UsageError("bench: say what to measure: recall")
        from evertalk.recall.command import run_recall

        return run_recall(args, args.home or default_home())
    if args.command == "import":
        from evertalk.import_cli import run_import

        return run_import(args.home or default_home(), args.paths, yes=args.yes)
    if args.command == "capture":
        from evertalk.capture_cli import run_capture

        return run_capture(args.home or default_home())
    if args.command == "mcp" and args.action is not None:
        from evertalk.mcp_cli import run_mcp_command

        return run_mcp_command(args, args.home or default_home())
    if args.command == "mcp":
        from evertalk.mcp_server import run_mcp

        return run_mcp(args.home or default_home())
    if args.command == "undo":
        return undo_cli.run_undo(args, args.home or default_home())
    if args.command == "store":
        if args.action is None:
            raise UsageError("store: say what to do: push URL, pull URL DIR or init URL")
        return store_cli.run_store(args, args.home or default_home())
    if args.command == "usage":
        from evertalk.usage_cli import run_usage_command

        return run_usage_command(args, args.home or default_home())
    if args.command is None:
        if _in_a_terminal():
            from evertalk.tui import run_terminal

            if args.workdir is not None:
                # the terminal app opens the agent itself: the folder reaches it through the
                # variable that overrides `workdir` in config.toml
                os.environ["EVERTALK_WORKDIR"] = str(args.workdir)
            return run_terminal(args.home or default_home(), message=_first_message(args))
        if args.message is not None:
            raise UsageError(NEEDS_A_TERMINAL)
        if args.workdir is not None:
            raise UsageError("--workdir goes with the terminal app or with -p MESSAGE")
        args.action = "status"  # not a terminal (a pipe, `make run` in CI): the memory's status
    elif args.action is None:
        raise UsageError(
            "memory: say what to do: status, view, zoom, date, search, browse, compact, repair, "
            "forget, redact or replay"
        )
    if args.action == "replay":
        return _replay(args)
    if args.action == "repair":
        from evertalk.repair_cli import run_repair

        return run_repair(args.home or default_home())  # a service that runs is stopped first
    if args.action == "browse":
        from evertalk.browse.command import run_browse

        return run_browse(args, args.home or default_home())
    if args.action == "search":
        from evertalk.search_cli import run_search

        return run_search(args, args.home or default_home())
    if args.action in ("forget", "redact"):
        from evertalk.forget_cli import run_forget

        return run_forget(args, args.home or default_home())
    if args.action == "compact":
        from evertalk.compact_cli import run_compact

        return run_compact(args.home or default_home())  # a client: the service is not stopped
    from evertalk.memory_cli import run_memory_command

    home = args.home or default_home()
    return run_memory_command(args, home)


NEEDS_A_TERMINAL = (
    "a message alone opens the app, which needs a terminal: evertalk -p MESSAGE answers without it"
)


def _first_message(args: argparse.Namespace) -> str | None:
    """The message the app sends once it is open (`evertalk "MESSAGE"`), if any."""
    message: str | None = args.message
    if message is not None and not message.strip():
        raise UsageError("the message is empty")
    return message


def _workdir(folder: Path) -> Path:
    """The `--workdir` folder, `~` expanded and made absolute; it must exist."""
    path = folder.expanduser().resolve()
    if not path.is_dir():
        why = "is not a directory" if path.exists() else "does not exist"
        raise UsageError(f"--workdir: {path} {why}")
    return path


def _in_a_terminal() -> bool:
    try:
        return sys.stdin.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


def _headless(args: argparse.Namespace) -> int:
    from evertalk.client.headless import run_via_service
    from evertalk.grants import parse_grants
    from evertalk.image_files import ImageError, read_image_file

    if args.command is not None:
        raise UsageError("-p runs one turn: it takes no command")
    if args.prompt == NO_MESSAGE and not args.retry:
        piped = _piped_in()  # `echo hi | evertalk -p`: what comes in, as with `-p -`
        if piped.strip():
            args.prompt = piped.removesuffix("\n")
    _check_retry(args)
    if args.raw and args.json_events:
        raise UsageError("--raw goes with -p without --json: JSON escapes control characters")
    if args.model is not None and (not args.model.strip() or args.model != args.model.strip()):
        raise UsageError(f"--model takes a model name, not {args.model!r}")
    try:
        grants = parse_grants(args.allow or "")
    except ValueError as error:
        raise UsageError(str(error)) from None
    try:  # read now: a wrong file is the command line's mistake, before any chat is opened
        images = [read_image_file(path) for path in args.images or ()]
    except ImageError as error:
        raise UsageError(f"--image {error}") from None
    message = sys.stdin.read() if args.prompt == "-" else args.prompt
    if args.prompt == "-":
        message = message.removesuffix("\n")
    # the service owns the chat and runs the turn; the first -p starts it
    return run_via_service(
        args.home or default_home(),
        message,
        as_json=args.json_events,
        grants=grants,
        workdir=args.workdir,
        images=images,
        retry=args.retry,
        model=args.model,
        over_budget=args.over_budget,
        raw=args.raw,
        now=args.now,
    )


def _piped_in() -> str:
    """What a pipe or a file on standard input holds; "" for a terminal, or for an input that
    is neither (`/dev/null`, none at all)."""
    import stat

    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISREG(mode)):
            return ""
        return sys.stdin.read()
    except (OSError, ValueError):  # no descriptor (a test's captured stdin), or closed
        return ""


def _check_retry(args: argparse.Namespace) -> None:
    """`-p MESSAGE`, or `-p --retry` alone: a retry sends the message already logged, with
    its own images."""
    if not args.retry:
        if args.prompt == NO_MESSAGE:
            raise UsageError("-p needs a MESSAGE (or --retry, to try the last one again)")
        return
    if args.prompt != NO_MESSAGE:
        raise UsageError(RETRY_TAKES_NO_MESSAGE)
    if args.images:
        raise UsageError("--retry takes no --image: the message goes with its own images")
    if args.model is not None:
        raise UsageError("--retry takes no --model: the turn runs on the turn model")


def _replay(args: argparse.Namespace) -> int:
    from evertalk.memory import Budget
    from evertalk.memory.replay import replay

    try:
        budget = Budget(args.ceiling, args.floor, args.cceiling, args.cfloor, args.window)
    except ValueError as error:
        raise UsageError(f"memory replay: {error}") from None
    for line in replay(sys.stdin, budget):
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    return 0
