"""The slash commands the service answers for its clients: the texts they show.

`/memory`, `/memory zoom`, `/memory search`, `/model`, `/memory-model`, `/agents`,
`/agents stop`, `/retry` and `/usage` need the open chat or the running agent, which live in the
service: a client sends
`{"type": "command", "name": "/memory zoom", "args": ["0", "8"]}` and shows the texts that come
back. `/model` and `/memory-model` change the running agent's models (the next turn, the
compactor's next call) and the agent saves them to `config.toml`. `/agents stop NAME` ends a
subagent (Ever is told). `/retry` runs a new turn for the last message that has no reply (its
turn failed), without sending it again.
"""

from __future__ import annotations

import difflib
import os
import textwrap
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Final

from evertalk.agent.retry import NothingToRetry, has_unanswered
from evertalk.agent.session import Agent
from evertalk.agent.subagents import RunningAgent, SubagentError
from evertalk.budget import today
from evertalk.chat import Chat, ToolInputError
from evertalk.config import EFFORTS, ConfigError
from evertalk.ledger import ledger_path, read_records, summarize
from evertalk.memory_cli import format_status
from evertalk.memory_search import LIVE_BACKLOG, SearchBehind, search, search_index
from evertalk.protocol.events import TurnEnded
from evertalk.providers.model_list import ModelList, is_listed, served_models
from evertalk.search.query import words
from evertalk.slash import (
    AGENTS,
    AGENTS_STOP,
    MEMORY,
    MEMORY_MODEL,
    MODEL,
    RETRY,
    RETRY_HINT,
    SEARCH,
    USAGE,
    ZOOM,
    Command,
    CommandError,
)
from evertalk.store.errors import StoreError
from evertalk.usage_cli import format_summary

SERVED: Final = (MEMORY, ZOOM, SEARCH, MODEL, MEMORY_MODEL, AGENTS, AGENTS_STOP, RETRY, USAGE)
"""The commands a client sends to the service, by name."""


def run(agent: Agent, home: Path, command: Command, args: tuple[str, ...]) -> list[str]:
    """The texts of `command` run on the agent: one row each. CommandError for one that
    cannot run as typed."""
    if command is MEMORY:
        if args:
            raise CommandError(f"usage: {MEMORY.usage}, {ZOOM.usage} or {SEARCH.usage}")
        status = agent.status()
        return list(memory_text(agent.chat, status.compactor_running, status.compactor_queued))
    if command is ZOOM:
        return [zoom_text(agent.chat, args)]
    if command is SEARCH:
        return [search_text(agent.chat, args)]
    if command is MODEL:
        listed = partial(model_list, agent)
        provider = agent.runtime.config.provider
        return [model_text(agent.model, agent.use_model, args, listed, provider)]
    if command is MEMORY_MODEL:
        settings = agent.compactor.settings
        return [memory_model_text(settings.model, settings.effort, agent.use_memory_model, args)]
    if command is AGENTS:
        return [agents_text(agent.subagents.listing(), args)]
    if command is AGENTS_STOP:
        return [stop_text(agent.subagents.stop, args)]
    if command is RETRY:
        return [retry_text(agent.retry, args)]
    if command is USAGE:
        return [usage_text(home, agent.runtime.config.budget_daily)]
    raise CommandError(f"{command.name} is not a command of the service")


def model_list(agent: Agent) -> ModelList:
    """The models the turn provider's server lists, asked at most once in a while (see
    `served_models`): the service asks first in a worker thread, then `/model` finds it kept."""
    config = agent.runtime.config
    key = config.api_key.reveal() if config.api_key else None
    return served_models(config.provider, key, config.base_url)


def memory_text(chat: Chat, running: int, queued: int) -> tuple[str, str]:
    """(every line of the view, the status) for `/memory`."""
    status = format_status(chat.status())
    activity = f"compactor summarizing {running}, queued {queued}"
    return chat.render_view(), f"{status}\n{activity}"


def zoom_text(chat: Chat, args: tuple[str, ...]) -> str:
    if len(args) != 2:
        raise CommandError(f"usage: {ZOOM.usage}, e.g. /memory zoom 0 8")
    try:
        start, count = int(args[0]), int(args[1])
    except ValueError:
        raise CommandError(f"ID and N are whole numbers: {ZOOM.usage}") from None
    try:
        return chat.zoom(start, count)
    except (ToolInputError, StoreError) as error:
        raise CommandError(str(error)) from None


SEARCH_SHOWN = 10  # hits `/memory search` shows


def search_text(chat: Chat, args: tuple[str, ...]) -> str:
    """`/memory search QUERY`: the hits, each with the view line to zoom into."""
    query = " ".join(args)
    if not words(query):
        raise CommandError(f"usage: {SEARCH.usage}, e.g. /memory search connection refused")
    try:
        with search_index(chat) as index:
            return search(chat, index, query, SEARCH_SHOWN, backlog=LIVE_BACKLOG).text()
    except (SearchBehind, StoreError) as error:
        raise CommandError(str(error)) from None


TASK_SHOWN = 80  # characters of a task's first line in `/agents`


def agents_text(running: Sequence[RunningAgent], args: tuple[str, ...]) -> str:
    """`/agents`: the running subagents, one line each (name, time, messages, task)."""
    if args:
        raise CommandError(f"usage: {AGENTS.usage}, or {AGENTS_STOP.usage}")
    if not running:
        return "no subagent is running"
    names = max(len(agent.name) for agent in running)
    lines = [f"{len(running)} subagent{'s' if len(running) != 1 else ''} running:"]
    for agent in running:
        messages = f"{agent.messages} message{'s' if agent.messages != 1 else ''}"
        lines.append(
            f"  {agent.name.ljust(names)}  {duration(agent.seconds):>7}  {messages:>12}  "
            + textwrap.shorten(agent.task, TASK_SHOWN, placeholder=" …")
        )
    lines.append(f"{AGENTS_STOP.usage} stops one")
    return "\n".join(lines)


def duration(seconds: float) -> str:
    """`42s`, `3m 05s`, `2h 07m`: how long a subagent has run."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def stop_text(stop: Callable[[str], str], args: tuple[str, ...]) -> str:
    """`/agents stop NAME` (`Subagents.stop`): the report Ever gets is shown to the user too."""
    if len(args) != 1:
        raise CommandError(f"usage: {AGENTS_STOP.usage}; /agents lists the running ones")
    try:
        report = stop(args[0])
    except SubagentError as error:
        raise CommandError(f"{error}; /agents lists the running ones") from None
    return f"stopped {args[0]}; Ever is told: {report}"


MODELS_SHOWN = 40
"""Model names `/model` shows at most: OpenRouter lists hundreds."""


def model_text(
    current: str,
    use_model: Callable[[str], None],
    args: tuple[str, ...],
    listed: Callable[[], ModelList] | None = None,
    provider: str = "",
) -> str:
    """`/model`: the turn model in use and the models the server lists (`listed`, when it can
    be asked), or a new one (`Agent.use_model`: it applies from the next turn and is saved to
    config.toml), refused when the server's list lacks it."""
    if not args:
        text = f"turn model: {current}\nset it with /model NAME"
        return text if listed is None else f"{text}\n{models_line(listed())}"
    if len(args) != 1:
        raise CommandError(f"usage: {MODEL.usage}: a model name is one word")
    name = args[0]
    found = listed() if listed is not None else ModelList()
    if found.ids and not is_listed(provider, name, found.ids):
        raise CommandError(f"unknown model {name}; the server has: {names(found.ids, name)}")
    _apply(lambda: use_model(name))
    unchecked = f"\n(not checked: {found.error})" if found.error is not None else ""
    return (
        f"turn model: {name} from the next turn on (a running turn ends on the model it "
        "began with); saved to config.toml" + _variable_note("EVERTALK_MODEL") + unchecked
    )


def models_line(found: ModelList) -> str:
    """The server's models as `/model` shows them, or why they are not shown."""
    if found.error is not None:
        return f"(the server's models could not be listed: {found.error})"
    if not found.ids:
        return "the server lists no model"
    return f"the server has: {names(found.ids)}"


def names(ids: Sequence[str], near: str | None = None) -> str:
    """`a, b, c`, those most like `near` first, and how many more when they are too many."""
    first = difflib.get_close_matches(near, ids, n=5, cutoff=0.6) if near is not None else []
    ordered = first + [i for i in ids if i not in first]
    more = len(ordered) - MODELS_SHOWN
    return ", ".join(ordered[:MODELS_SHOWN]) + (f" and {more} more" if more > 0 else "")


def memory_model_text(
    current: str,
    effort: str | None,
    use_memory_model: Callable[[str, str | None], None],
    args: tuple[str, ...],
) -> str:
    """`/memory-model`: the compactor's model and effort in use, or new ones
    (`Agent.use_memory_model`: from its next call, saved to config.toml). An effort name alone
    sets the effort only."""
    if not args:
        return f"compaction {_model_and_effort(current, effort)}\n" + (
            "set them with /memory-model [NAME] [EFFORT]"
        )
    if len(args) > 2:
        raise CommandError(f"usage: {MEMORY_MODEL.usage}")
    model, new_effort = args[0], (args[1] if len(args) == 2 else None)
    if len(args) == 1 and args[0] in EFFORTS:
        model, new_effort = current, args[0]
    if new_effort is not None and new_effort not in EFFORTS:
        raise CommandError(f"the effort is one of {', '.join(EFFORTS)}, not {new_effort!r}")
    _apply(lambda: use_memory_model(model, new_effort))
    return (
        f"compaction {_model_and_effort(model, new_effort or effort)} from the compactor's "
        "next call on; saved to config.toml" + _variable_note("EVERTALK_MEMORY_MODEL")
    )


def _model_and_effort(model: str, effort: str | None) -> str:
    return f"model: {model}, effort {effort or 'left to the model'}"


def _variable_note(variable: str) -> str:
    if os.environ.get(variable):
        return f" ({variable} is set: it overrides config.toml at the next start)"
    return ""


def _apply(change: Callable[[], None]) -> None:
    """Run a model change of the agent; its ConfigError (a bad name, a file that cannot be
    written: nothing changed) is the command's."""
    try:
        change()
    except (ConfigError, ValueError) as error:
        raise CommandError(str(error)) from None


def retry_text(retry: Callable[[], list[int]], args: tuple[str, ...]) -> str:
    """`/retry` (`Agent.retry`): a new turn for the last message that has no reply, without
    sending it again."""
    if args:
        raise CommandError(f"usage: {RETRY.usage}: it takes no argument")
    try:
        ids = retry()
    except NothingToRetry as error:
        raise CommandError(str(error)) from None
    return f"trying the turn again for message {ids[0]}"


def retry_hint(chat: Chat, ended: TurnEnded) -> str | None:
    """What to tell after a turn that stopped (an error, a limit) and left its message
    without a reply: how to try it again. None otherwise."""
    if ended.reason in ("done", "cancelled"):
        return None
    return RETRY_HINT if has_unanswered(chat) else None


def usage_text(home: Path, daily: float | None = None) -> str:
    """`/usage`: the ledger's table, and today against the daily budget when there is one."""
    text = _ledger_text(home)
    if daily is not None:
        text += "\n" + today(home, daily).usage_line()
    return text


def _ledger_text(home: Path) -> str:
    path = ledger_path(home)
    try:
        contents = read_records(path)
    except FileNotFoundError:
        return f"No model calls yet: {path} gets a line for each one."
    except OSError as error:
        raise CommandError(f"cannot read {path}: {error.strerror or error}") from None
    if not contents.records:
        return f"No model calls yet: {path} gets a line for each one."
    text = format_summary(summarize(contents.records))
    if contents.skipped:
        text += f"\n(skipped {contents.skipped:,} unreadable lines of {path})"
    return text
