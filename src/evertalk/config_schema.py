"""What `config.toml` may hold, as msgspec types, and the one-line problem when it holds else.

Each table is a `Struct` that refuses keys it does not know; each setting's type carries its
limits (`Meta`). `read_settings` turns the parsed file into its settings by dotted key;
`check_setting` checks one value (from a variable, or about to be saved) by the same types.
A refusal is a `SettingProblem`, which says what the setting must be in the project's words
(`EXPECTED`), and never shows a value of `api_key` or `store.url` (HIDDEN).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal, TypeAlias, get_args

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

ProviderName = Literal["anthropic", "openai", "openrouter", "ollama", "llamacpp", "vllm"]
Policy = Literal["allow", "ask", "deny"]
ToolSwitch = Literal["on", "off"]
Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
SandboxMode = Literal["auto", "require", "off"]
NetworkRule = Literal["allow", "deny"]

PROVIDERS: Final[tuple[str, ...]] = get_args(ProviderName)
POLICIES: Final[tuple[str, ...]] = get_args(Policy)
TOOL_SWITCH: Final[tuple[str, ...]] = get_args(ToolSwitch)
EFFORTS: Final[tuple[str, ...]] = get_args(Effort)

MAX_CONCURRENCY: Final = 8
"""The most compaction calls in flight at once (SPEC §4.1)."""
MIN_COMPACTION_TOKENS: Final = 200
"""The smallest `memory.max_tokens`: a line needs about 170 tokens."""
MIN_CONTEXT_WINDOW: Final = 8_000
"""The smallest `turn.context_window`: below it no system prompt and view fit."""

_FINITE: Final = sys.float_info.max  # msgspec takes no infinite bound: this one refuses inf

ModelName = Annotated[str, Meta(pattern=r"\A\S(?:[\s\S]*\S)?\Z")]  # no space at either end
Address = Annotated[str, Meta(pattern=r"\Ahttps?://[^\s/]")]
Folder = Annotated[str, Meta(pattern=r"\A(?=[\s\S]*\S)[^\x00]*\Z")]  # not blank, no NUL
Key = Annotated[str, Meta(min_length=1)]
Seconds = Annotated[float, Meta(ge=0, le=_FINITE)]
Tokens = Annotated[int, Meta(ge=MIN_CONTEXT_WINDOW)]
# libpq's URL form only, not its `host=… dbname=…` one: a URL is what `evertalk store push`
# takes and writes, and what can be shown without its password (`pgstore.url`)
# names of variables, apart by spaces or commas (`tools.shell_env`)
VariableNames = Annotated[str, Meta(pattern=r"\A[\s,]*(?:[A-Za-z_][A-Za-z0-9_]*[\s,]*)*\Z")]
DatabaseUrl = Annotated[str, Meta(pattern=r"\Apostgres(?:ql)?://\S*\Z")]


class _Table(Struct, forbid_unknown_fields=True):
    """A table of settings: every field unset unless the file holds it."""


class MemoryTable(_Table):
    """`[memory]`."""

    model: ModelName | UnsetType = UNSET
    effort: Effort | UnsetType = UNSET
    settle_timeout: Seconds | UnsetType = UNSET
    concurrency: Annotated[int, Meta(ge=1, le=MAX_CONCURRENCY)] | UnsetType = UNSET
    deadline: Annotated[float, Meta(gt=0, le=_FINITE)] | UnsetType = UNSET
    context_window: Tokens | UnsetType = UNSET
    catch_up_timeout: Seconds | UnsetType = UNSET
    provider: ProviderName | UnsetType = UNSET
    base_url: Address | UnsetType = UNSET
    yield_to_turns: bool | UnsetType = UNSET
    min_shared_words: Annotated[float, Meta(ge=0, le=1)] | UnsetType = UNSET
    max_tokens: Annotated[int, Meta(ge=MIN_COMPACTION_TOKENS)] | UnsetType = UNSET
    search: bool | UnsetType = UNSET


class TurnTable(_Table):
    """`[turn]`."""

    effort: Effort | UnsetType = UNSET
    context_window: Tokens | UnsetType = UNSET
    tools: ToolSwitch | UnsetType = UNSET


class ToolsTable(_Table):
    """`[tools]`."""

    shell: Policy | UnsetType = UNSET
    read: Policy | UnsetType = UNSET
    write: Policy | UnsetType = UNSET
    edit: Policy | UnsetType = UNSET
    fetch: Policy | UnsetType = UNSET
    shell_sandbox: SandboxMode | UnsetType = UNSET
    shell_network: NetworkRule | UnsetType = UNSET
    fetch_private: bool | UnsetType = UNSET
    shell_env: VariableNames | UnsetType = UNSET


class BudgetTable(_Table):
    """`[budget]`."""

    daily: Annotated[float, Meta(gt=0, le=_FINITE)] | UnsetType = UNSET


class UndoTable(_Table):
    """`[undo]`."""

    keep_days: Annotated[float, Meta(ge=0, le=_FINITE)] | UnsetType = UNSET
    max_mb: Annotated[float, Meta(ge=0, le=_FINITE)] | UnsetType = UNSET


class StoreTable(_Table):
    """`[store]`: where the chat is kept (unset: the files of the home)."""

    url: DatabaseUrl | UnsetType = UNSET
    lease_seconds: Annotated[float, Meta(ge=3, le=3600)] | UnsetType = UNSET


class SettingsFile(_Table):
    """The whole file. `mcp` is not flat: `mcp_settings` reads it."""

    provider: ProviderName | UnsetType = UNSET
    model: ModelName | UnsetType = UNSET
    base_url: Address | UnsetType = UNSET
    api_key: Key | UnsetType = UNSET
    workdir: Folder | UnsetType = UNSET
    memory: MemoryTable | UnsetType = UNSET
    turn: TurnTable | UnsetType = UNSET
    tools: ToolsTable | UnsetType = UNSET
    budget: BudgetTable | UnsetType = UNSET
    undo: UndoTable | UnsetType = UNSET
    store: StoreTable | UnsetType = UNSET
    mcp: Any = UNSET


_TABLE_TYPES: Final[Mapping[str, type[_Table]]] = {
    "memory": MemoryTable,
    "turn": TurnTable,
    "tools": ToolsTable,
    "budget": BudgetTable,
    "undo": UndoTable,
    "store": StoreTable,
}
TABLES: Final[tuple[str, ...]] = tuple(_TABLE_TYPES)
KEYS: Final[tuple[str, ...]] = tuple(
    key
    for name in SettingsFile.__struct_fields__
    if name != "mcp"
    for key in (
        [f"{name}.{field}" for field in _TABLE_TYPES[name].__struct_fields__]
        if name in _TABLE_TYPES
        else [name]
    )
)
"""Every setting by dotted key, in the order a new file gets them."""


def _one_of(choices: tuple[str, ...]) -> str:
    return "one of " + ", ".join(choices)


_SECONDS: Final = "a number of seconds"
_TOKENS: Final = f"a whole number of tokens >= {MIN_CONTEXT_WINDOW}"
_SWITCH: Final = "true or false"
_POLICY: Final = "allow, ask or deny"
EXPECTED: Final[Mapping[str, str]] = {
    "provider": _one_of(PROVIDERS),
    "model": "a model name",
    "base_url": "an http:// or https:// address",
    "api_key": "a non-empty string",
    "workdir": "a directory's path",
    "memory.model": "a model name",
    "memory.effort": _one_of(EFFORTS),
    "memory.settle_timeout": _SECONDS,
    "memory.concurrency": f"a whole number from 1 to {MAX_CONCURRENCY}",
    "memory.deadline": _SECONDS,
    "memory.context_window": _TOKENS,
    "memory.catch_up_timeout": _SECONDS,
    "memory.provider": _one_of(PROVIDERS),
    "memory.base_url": "an http:// or https:// address",
    "memory.yield_to_turns": _SWITCH,
    "memory.min_shared_words": "a share from 0 to 1",
    "memory.max_tokens": f"a whole number of tokens >= {MIN_COMPACTION_TOKENS}",
    "memory.search": _SWITCH,
    "turn.effort": _one_of(EFFORTS),
    "turn.context_window": _TOKENS,
    "turn.tools": '"on" or "off"',
    "tools.shell": _POLICY,
    "tools.read": _POLICY,
    "tools.write": _POLICY,
    "tools.edit": _POLICY,
    "tools.fetch": _POLICY,
    "tools.shell_sandbox": _one_of(get_args(SandboxMode)),
    "tools.shell_network": _one_of(get_args(NetworkRule)),
    "tools.fetch_private": _SWITCH,
    "tools.shell_env": "names of environment variables, apart by spaces or commas",
    "budget.daily": "a number of dollars > 0",
    "undo.keep_days": "a number >= 0",
    "undo.max_mb": "a number >= 0",
    "store.url": "a postgresql:// or postgres:// URL",
    "store.lease_seconds": "a number of seconds from 3 to 3600",
}
"""What each setting must be, as a refusal says it."""

IN_RANGE: Final[Mapping[str, str]] = {
    "memory.settle_timeout": "a number of seconds >= 0",
    "memory.catch_up_timeout": "a number of seconds >= 0",
    "memory.deadline": "a positive number of seconds",
}
"""… said more exactly when the value is a finite number out of the setting's range."""

HIDDEN: Final = frozenset({"api_key", "store.url"})
"""The settings whose value a refusal never repeats: a key, a URL that may hold a password."""


class SettingProblem(Exception):
    """A setting the types refuse: `line(where)` says so in one line."""

    def __init__(self, key: str, *, value: object = None, unknown: bool = False) -> None:
        super().__init__(key)
        self.key = key
        self._value = value
        self._unknown = unknown

    def line(self, where: object) -> str:
        """`where: …`, naming the setting and what it must be (never a value of HIDDEN)."""
        key, value = self.key, self._value
        if self._unknown:
            return f"{where}: unknown setting `{key}`"
        if key in _TABLE_TYPES:
            return f"{where}: `{key}` must be a table ([{key}])"
        expected = IN_RANGE.get(key, EXPECTED[key]) if _finite(value) else EXPECTED[key]
        if key in HIDDEN:  # never repeat any part of it
            return f"{where}: `{key}` must be {expected}"
        # Short values (a misspelt name) are shown; a long one may be a key put in the wrong
        # place, so only its kind is.
        shown = repr(value)
        if len(shown) > 24:
            shown = f"a {len(value)}-character string" if isinstance(value, str) else "that"
        return f"{where}: `{key}` must be {expected}, not {shown}"


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


Plain: TypeAlias = str | int | float | bool


def read_settings(data: Mapping[str, object]) -> tuple[dict[str, Plain], object]:
    """The file's settings by dotted key (only those it holds), and its `mcp` table as read
    (None: none). A setting the types refuse is a SettingProblem."""
    settings = _decode(data)
    flat: dict[str, Plain] = {}
    for name in SettingsFile.__struct_fields__:
        value = getattr(settings, name)
        if value is UNSET or name == "mcp":
            continue
        if isinstance(value, _Table):
            for field in value.__struct_fields__:
                item = getattr(value, field)
                if item is not UNSET:
                    flat[f"{name}.{field}"] = item
        else:
            flat[name] = value
    mcp = settings.mcp
    return flat, None if mcp is UNSET else mcp


def check_setting(key: str, value: object) -> Plain:
    """`value` as the setting `key` holds it (an int for a number of dollars is a float), if
    the types take it; else a SettingProblem."""
    table, _, name = key.rpartition(".")
    flat, _ = read_settings({table: {name: value}} if table else {name: value})
    return flat[key]


def _decode(data: Mapping[str, object]) -> SettingsFile:
    try:
        return msgspec.convert(data, SettingsFile, strict=True)
    except msgspec.ValidationError as error:
        raise _problem(str(error), data) from None


def _problem(message: str, data: Mapping[str, object]) -> SettingProblem:
    """The setting msgspec's message names (`… - at `$.memory.concurrency``), and its value."""
    head, found, path = message.rpartition(" - at `$.")
    if not found:
        head, path = message, ""
    where = path.removesuffix("`")
    unknown = "Object contains unknown field `"
    if head.startswith(unknown):
        field = head.removeprefix(unknown).removesuffix("`")
        return SettingProblem(f"{where}.{field}" if where else field, unknown=True)
    table, _, name = where.rpartition(".")
    holder = data.get(table) if table else data
    value = holder.get(name) if isinstance(holder, Mapping) else None
    return SettingProblem(where, value=value)
