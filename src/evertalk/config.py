"""Settings: `<home>/config.toml`, overridden by the environment (SPEC §1.1, §4.7, §6.6).

`load_config` reads the file with `tomllib`, checks every value by the types of
`config_schema`, applies the environment and fills in the defaults; `save_config` changes the
settings in the file with `tomlkit`, which keeps the user's comments and layout, and writes it
private (0600 in a 0700 folder) and atomic.

Precedence, highest first:

- `EVERTALK_PROVIDER`, `EVERTALK_MODEL`, `EVERTALK_MEMORY_MODEL`, `EVERTALK_WORKDIR` (which the
  command line's `--workdir` sets), the provider's key variable (`ANTHROPIC_API_KEY`,
  `OPENAI_API_KEY`, `OPENROUTER_API_KEY`; a local server has none) and its SDK's base URL
  variable (`ANTHROPIC_BASE_URL` for anthropic, `OPENAI_BASE_URL` for openai) override the file;
- the file, then the defaults (for `base_url`, the provider's usual address). With no provider
  named anywhere, exactly one key variable set picks its provider; otherwise the provider is
  anthropic.

`OPENAI_BASE_URL` is not read for openrouter, ollama, llamacpp or vllm, though they talk through
the OpenAI SDK too: the variable is usually set for OpenAI itself, and honouring it would send
their key, and the chat, to that address. As with the key variables, each provider reads only
its own.

When the environment names another provider than the file, the file's model, memory model,
base_url and api_key belong to the file's provider and are not used: a key is never sent to
another provider's endpoint.

The API key lives in a `Secret`, whose repr and str are `Secret('***')`; no error message of this
module holds a value of `api_key`. `secret_values` and `redact` keep the key, and every credential
variable's value, out of what tools return and what errors say (the log is kept forever).

`[store] url` may hold the database's password: `Config.store_url` is left out of the repr, the
loaded values (`Origin`) keep it in a `Secret` as they keep the key, a refusal never repeats it,
and `secret_values` gives its password to be redacted too.
"""

from __future__ import annotations

import hmac
import os
import re
import stat
import sys
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final, TypeAlias, cast

from evertalk import secret_env
from evertalk.config_schema import EFFORTS as EFFORTS
from evertalk.config_schema import KEYS as KEYS
from evertalk.config_schema import MAX_CONCURRENCY as MAX_CONCURRENCY
from evertalk.config_schema import MIN_COMPACTION_TOKENS as MIN_COMPACTION_TOKENS
from evertalk.config_schema import MIN_CONTEXT_WINDOW as MIN_CONTEXT_WINDOW
from evertalk.config_schema import POLICIES as POLICIES
from evertalk.config_schema import PROVIDERS as PROVIDERS
from evertalk.config_schema import TABLES as TABLES
from evertalk.config_schema import TOOL_SWITCH as TOOL_SWITCH
from evertalk.config_schema import NetworkRule as NetworkRule
from evertalk.config_schema import Policy as Policy
from evertalk.config_schema import ProviderName as ProviderName
from evertalk.config_schema import SandboxMode as SandboxMode
from evertalk.config_schema import SettingProblem, check_setting, read_settings
from evertalk.config_schema import ToolSwitch as ToolSwitch
from evertalk.mcp_settings import McpSettings, parse_mcp
from evertalk.redaction import REDACTED as REDACTED
from evertalk.redaction import SECRET_MIN_LENGTH
from evertalk.redaction import redact as redact
from evertalk.store.secure import make_dir, write_atomic
from evertalk.terminal_text import escape_controls

LOCAL_PROVIDERS: Final = ("ollama", "llamacpp", "vllm")

CONFIG_FILE: Final = "config.toml"

# (turn model, compaction model). The compactor's default is the provider's smallest current
# model, which takes an effort setting (SPEC §4.7: small model, high effort). A local server has
# no model we could guess: the user names it, and the compactor uses it too.
DEFAULT_MODELS: Final[Mapping[str, tuple[str, str]]] = {
    "anthropic": ("claude-sonnet-5-5", "claude-haiku-5-5"),
    "openai": ("gpt-5.6-terra", "gpt-5.6-luna"),
    "openrouter": ("openai/gpt-5.6-terra", "openai/gpt-5.6-luna"),
    "ollama": ("", ""),
    "llamacpp": ("", ""),
    "vllm": ("", ""),
}

# Where a provider listens when neither the file nor the environment says; None: the SDK's own.
DEFAULT_BASE_URLS: Final[Mapping[str, str | None]] = {
    "anthropic": None,
    "openai": None,
    "openrouter": "https://openrouter.ai/api/v1",
    "ollama": "http://localhost:11434/v1",
    "llamacpp": "http://localhost:8080/v1",
    "vllm": "http://localhost:8000/v1",
}

# A local server takes a key from the file only: the user's OpenAI key is not sent to it.
KEY_VARIABLES: Final[Mapping[str, str]] = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
}
AUTH_TOKEN_VARIABLE: Final = "ANTHROPIC_AUTH_TOKEN"
"""The Anthropic SDK's bearer token, which it uses when no API key is given."""
CREDENTIAL_VARIABLES: Final[tuple[str, ...]] = (*KEY_VARIABLES.values(), AUTH_TOKEN_VARIABLE)
"""Every variable that may hold a credential: hidden from the shell tool's commands, and their
values redacted from tool results, the log and error texts."""
LOCAL_API_KEY: Final = "local"
"""The key sent to a local server that needs none (the SDK insists on one). A placeholder, not a
credential: it is never redacted (`localhost` would read `[redacted]host` in every error)."""
PLACEHOLDER_KEYS: Final = frozenset({LOCAL_API_KEY})
LOCAL_CONCURRENCY: Final = 1
"""The compactor's calls at once on a local server: it serves one request at a time, and a
default llama-cpp-python server cuts the stream it is sending when another request arrives."""
MIN_SHARED_WORDS: Final = 0.5
"""The default `memory.min_shared_words` (`compactor.grounding.MIN_SHARED`, not imported)."""
COMPACTION_TOKENS: Final = 1_000
"""The default `memory.max_tokens` (`compactor.window.REPLY_TOKENS`, not imported)."""

# The SDKs' own base URL variables, each honoured for its own provider only.
BASE_URL_VARIABLES: Final[Mapping[str, str]] = {
    "anthropic": "ANTHROPIC_BASE_URL",
    "openai": "OPENAI_BASE_URL",
}


class ConfigError(Exception):
    """A setting that cannot be used: one line naming the file (or variable) and the problem."""


class Secret:
    """A value that must not be shown: repr and str are `Secret('***')`; `reveal()` gives it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash((Secret, self._value))


@dataclass(frozen=True)
class MemoryConfig:
    """`[memory]`: the compactor. An empty `model` means the provider's default.

    The compactor may call another provider or server than the turns (`provider`, `base_url`):
    a local turn model can pair with a hosted summarizer, or the other way round. Left unset,
    they are the turns'; `base_url` unset with another provider is that provider's usual
    address. `api_key` is no setting: the compactor's key when its provider is not the turns',
    read from that provider's key variable (the turns' key is never sent to another provider).

    `load_config` fills in the defaults that depend on the compactor's provider: `concurrency`
    is 1 on a local server, 8 otherwise, and `yield_to_turns` (a compaction call gives way to a
    turn's call on the server they share, SPEC §4.1) is on when the compactor shares a local
    server with the turns. A value in the file wins.
    """

    model: str = ""
    effort: str = "high"
    settle_timeout: float = 20
    concurrency: int = MAX_CONCURRENCY
    deadline: float = 600
    context_window: int = 200_000  # tokens: no compaction request passes it (SPEC §3.7)
    catch_up_timeout: float = 300  # seconds a turn waits at most for a chat that is behind
    provider: ProviderName | None = None  # None: the turns' provider
    base_url: str | None = None  # None: the turns' (same provider) or the provider's usual one
    yield_to_turns: bool = False
    # the least share of a summary's content words its input must hold (SPEC §4.8); 0 leaves
    # only the check of its names, numbers, codes and paths
    min_shared_words: float = MIN_SHARED_WORDS
    # the output cap of a compaction's reply, in tokens (room for thoughts is added for a hosted
    # model asked to think); raise it for a local model that thinks before it answers
    max_tokens: int = COMPACTION_TOKENS
    # a full-text index kept as messages are logged, and the `search` tool (opt-in: the view and
    # zoom are the memory; `evertalk memory search` works either way)
    search: bool = False
    api_key: Secret | None = None


@dataclass(frozen=True)
class TurnConfig:
    """`[turn]`: None leaves the reasoning effort to the model, and `context_window` None means
    the session's default (`CONTEXT_BUDGET` of `context_budget.py`).

    `tools = "off"` offers the model no tools at all, in turns and compactions alike (they share
    one prompt prefix): for a small local model that never calls them and instead makes up what
    they would have returned."""

    effort: str | None = None
    context_window: int | None = None
    tools: ToolSwitch = "on"


@dataclass(frozen=True)
class ToolPolicies:
    """`[tools]`: may the model run a tool: `allow`, `ask` the user, or `deny` (SPEC §6.6);
    and the shell's sandbox (`agent/tools/sandbox.py`): used where it can start (`auto`),
    always (`require`: no command runs without it) or never (`off`), and with the network
    allowed or denied."""

    shell: Policy = "ask"
    read: Policy = "allow"
    write: Policy = "ask"
    edit: Policy = "ask"
    fetch: Policy = "ask"
    shell_sandbox: SandboxMode = "auto"
    shell_network: NetworkRule = "allow"
    fetch_private: bool = False
    """Whether `fetch` may reach loopback, link-local and private addresses."""
    shell_env: tuple[str, ...] = ()
    """Variables the user lets the shell's commands see beyond the allow-list, credentials
    included (`agent/tools/tool_env.py`)."""


Value: TypeAlias = str | int | float | bool | Secret | None


@dataclass(frozen=True)
class Origin:
    """Where a loaded config came from, so that saving it writes back only the user's settings:
    `file` holds the file's values by dotted key, `loaded` every value as `load_config` made it."""

    file: Mapping[str, Value]
    loaded: Mapping[str, Value]


@dataclass(frozen=True)
class Config:
    """The settings in effect. An empty `model` or `memory.model` means the provider's default.

    `base_url` None means the SDK's own default address.
    """

    provider: ProviderName = "anthropic"
    model: str = ""
    base_url: str | None = None
    api_key: Secret | None = None
    memory: MemoryConfig = MemoryConfig()
    turn: TurnConfig = TurnConfig()
    tools: ToolPolicies = ToolPolicies()
    workdir: str | None = None  # as written (`~` kept); `workdir_path` expands it
    budget_daily: float | None = None  # `[budget] daily`: dollars a day; None: no budget
    undo_keep_days: float = 14.0  # `[undo] keep_days`: how long a turn's checkpoint is kept
    undo_max_mb: float = 200.0  # `[undo] max_mb`: the room all checkpoints may take
    mcp: McpSettings = field(default_factory=McpSettings)  # `[mcp]`: other servers' tools
    # `[store] url`: the database the chat is kept in; None: the home's files. Not in the repr:
    # it may hold the password
    store_url: str | None = field(default=None, repr=False)
    # `[store] lease_seconds`: how long a machine that stops answering keeps its compactions
    store_lease_seconds: float = 30.0
    origin: Origin | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.provider not in DEFAULT_MODELS:
            raise ValueError(f"unknown provider {self.provider!r}")
        turn_default = DEFAULT_MODELS[self.provider][0]
        if not self.model:
            object.__setattr__(self, "model", turn_default)
        if not self.memory.model:
            # a local server's model is the user's to name: the turns' one when the compactor
            # calls the same kind of server, else none (`load_config` asks for it)
            memory_default = DEFAULT_MODELS[self.memory_provider][1]
            same = self.memory_provider == self.provider
            memory = replace(self.memory, model=memory_default or (self.model if same else ""))
            object.__setattr__(self, "memory", memory)

    @property
    def memory_provider(self) -> ProviderName:
        """The compactor's provider: `[memory] provider`, else the turns'."""
        return self.memory.provider or self.provider

    @property
    def memory_base_url(self) -> str | None:
        """The compactor's server: `[memory] base_url`, else the turns' when it calls the same
        provider, else that provider's usual address (None: its SDK's own)."""
        if self.memory.base_url is not None:
            return self.memory.base_url
        if self.memory_provider == self.provider:
            return self.base_url
        return DEFAULT_BASE_URLS[self.memory_provider]

    @property
    def memory_shares_server(self) -> bool:
        """Whether compactions and turns call one server (and so may share a prefix gate)."""
        return (self.memory_provider, self.memory_base_url) == (self.provider, self.base_url)

    @property
    def memory_api_key(self) -> Secret | None:
        """The compactor's key: the turns' for the same provider, else its own variable's."""
        return self.api_key if self.memory_provider == self.provider else self.memory.api_key

    @property
    def workdir_path(self) -> Path | None:
        """Where the tools work, `~` expanded; None: where evertalk was started (SPEC §6.6)."""
        return Path(self.workdir).expanduser() if self.workdir else None


def config_path(home: Path) -> Path:
    return home / CONFIG_FILE


# --- reading -------------------------------------------------------------------------------

# The settings' keys and types are `config_schema`'s (KEYS, TABLES).
SECRET_KEYS: Final = ("api_key", "store.url")
"""The settings held as a `Secret` among the values by key, so that no repr of them (an Origin's)
shows one."""
# The settings that belong to one provider: not carried over when the environment switches.
PROVIDER_KEYS: Final = ("model", "memory.model", "base_url", "api_key", "memory.base_url")
MEMORY_PROVIDER_KEYS: Final = ("memory.model", "memory.base_url")
"""… except the compactor's, when it names a provider of its own."""


Warn: TypeAlias = Callable[[str], None]
"""Where `load_config` says what it corrected: one line, never a value of `api_key`."""


def warn_on_stderr(message: str) -> None:
    """How a command line is told: `evertalk: warning: …` on standard error."""
    print(f"evertalk: warning: {escape_controls(message)}", file=sys.stderr)


def load_config(
    home: Path, env: Mapping[str, str] | None = None, *, warn: Warn = warn_on_stderr
) -> Config:
    """The settings in effect for `home`: the file (if any), the environment (by default this
    process's, its sealed credentials included), the defaults. A file holding a secret that
    other users may read is made private first (`warn` is told)."""
    if env is None:
        env = secret_env.environment()
    path = config_path(home)
    tables: dict[str, object] = {}  # `[mcp]`, which is not flat
    file = _read_file(path, warn, tables)
    values: dict[str, Value] = dict(file)

    env_provider = _env(env, "EVERTALK_PROVIDER")
    if env_provider is not None:
        provider = _check("provider", env_provider, "EVERTALK_PROVIDER")
        if provider != file.get("provider", provider):
            apart = "memory.provider" in file
            for key in PROVIDER_KEYS:
                if not (apart and key in MEMORY_PROVIDER_KEYS):
                    values.pop(key, None)
        values["provider"] = provider
    elif "provider" not in values:
        chosen = [p for p in ("anthropic", "openai", "openrouter") if _env(env, KEY_VARIABLES[p])]
        values["provider"] = chosen[0] if len(chosen) == 1 else "anthropic"
    provider = cast(ProviderName, values["provider"])

    for variable, key in (("EVERTALK_MODEL", "model"), ("EVERTALK_MEMORY_MODEL", "memory.model")):
        value = _env(env, variable)
        if value is not None:
            values[key] = _check(key, value, variable)
    workdir = _env(env, "EVERTALK_WORKDIR")
    if workdir is not None:
        values["workdir"] = _check("workdir", workdir, "EVERTALK_WORKDIR")
    key_variable = KEY_VARIABLES.get(provider)
    key_value = _env(env, key_variable) if key_variable else None
    if key_value is not None:
        values["api_key"] = Secret(key_value)
    values["base_url"] = _base_url(env, provider, values.get("base_url"))
    memory_provider = cast(ProviderName, values.get("memory.provider", provider))
    memory_key = KEY_VARIABLES.get(memory_provider)
    memory_key_value = _env(env, memory_key) if memory_key else None
    if memory_provider != provider and memory_key_value is not None:
        values["memory.api_key"] = Secret(memory_key_value)

    config = _build(values)
    if not config.model:
        raise ConfigError(
            f'{path}: provider {provider!r} needs a model: set `model = "…"` (or EVERTALK_MODEL)'
        )
    if not config.memory.model:
        raise ConfigError(
            f"{path}: the compactor's provider {memory_provider!r} needs a model: set "
            '`model = "…"` in [memory] (or EVERTALK_MEMORY_MODEL)'
        )
    _check_workdir(config, "EVERTALK_WORKDIR" if workdir is not None else path)
    try:
        mcp = parse_mcp(tables.get("mcp"))
    except ValueError as error:
        raise ConfigError(f"{path}: {error}") from None
    return replace(config, mcp=mcp, origin=Origin(file=file, loaded=_flatten(config)))


def _base_url(env: Mapping[str, str], provider: str, from_file: Value) -> Value:
    """The provider's own base URL variable, else the file's `base_url`, else the default."""
    variable = BASE_URL_VARIABLES.get(provider)
    url = _env(env, variable) if variable else None
    if variable and url is not None:
        return _check("base_url", url, variable)
    return from_file if from_file is not None else DEFAULT_BASE_URLS[provider]


def _check_workdir(config: Config, where: Path | str) -> None:
    """The working directory must exist when evertalk starts. Checked here rather than in
    `_check`, so that saving a model change still works after the folder went away."""
    folder = config.workdir_path
    if folder is not None and not folder.is_dir():
        why = "is not a directory" if folder.exists() else "does not exist"
        raise ConfigError(f"{where}: `workdir`: {folder} {why}")


def _env(env: Mapping[str, str], name: str) -> str | None:
    """A variable's value; an empty variable counts as unset."""
    value = env.get(name)
    return value if value else None


def _read_file(path: Path, warn: Warn, tables: dict[str, object] | None = None) -> dict[str, Value]:
    """The file's settings by dotted key, each checked; {} when there is no file. The `mcp`
    table, which is not flat, goes into `tables` as read."""
    try:
        data, problem = _read_private(path, warn)
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None
    if data is None:
        raise ConfigError(f"{path}: not valid TOML: {problem}")
    try:
        plain, mcp = read_settings(data)
    except SettingProblem as refused:
        raise ConfigError(refused.line(path)) from None
    finally:
        del data  # it may hold the key: keep it out of the frames of later errors
    if tables is not None and mcp is not None:
        tables["mcp"] = mcp
    flat: dict[str, Value] = dict(plain)
    for key in SECRET_KEYS:
        if key in plain:
            flat[key] = Secret(cast(str, plain[key]))
    return flat


def _read_private(path: Path, warn: Warn) -> tuple[dict[str, object] | None, str]:
    """The file parsed (as `_parse_toml`); if it holds `api_key`, made private while it is open
    (its mode is read from, and set on, the file that was read, even through a symlink)."""
    with path.open("rb") as file:
        text = file.read().decode("utf-8")
        parsed = _parse_toml(text)
        del text  # the raw text may hold the key: keep it out of the frames of later errors
        held = None if parsed[0] is None else _secret_held(parsed[0])
        if held is not None:
            _make_private(file.fileno(), path, warn, held)
    return parsed


def _secret_held(document: Mapping[str, object]) -> str | None:
    """What secret the parsed file holds (for the line that says it was made private), or
    None: a key, a database password in `[store] url`, an MCP server's environment."""
    if "api_key" in document:
        return "api_key"
    memory, store, mcp = (document.get(name) for name in ("memory", "store", "mcp"))
    if isinstance(memory, dict) and "api_key" in memory:
        return "memory.api_key"
    url = store.get("url") if isinstance(store, dict) else None
    if isinstance(url, str) and url_passwords(url):
        return "a database password (store.url)"
    servers = mcp.get("servers") if isinstance(mcp, dict) else None
    if isinstance(servers, dict) and any(
        isinstance(server, dict) and server.get("env") for server in servers.values()
    ):
        return "an MCP server's environment (mcp.servers)"
    return None


OTHERS: Final = 0o077
"""The bits of a mode that let the group and other users read, write or run a file."""


def _make_private(fd: int, path: Path, warn: Warn, held: str) -> None:
    """As ssh does with a private key: a file holding a key is for its owner alone. Others must
    not read it, nor write it (they could send the key to a `base_url` of theirs): their bits
    are dropped, and the user is told once (the next load finds nothing to do)."""
    mode = stat.S_IMODE(os.fstat(fd).st_mode)
    if not mode & OTHERS:
        return
    private = mode & ~OTHERS
    try:
        os.fchmod(fd, private)
    except OSError as error:  # another user's file: say so at each start, until it is fixed
        why = error.strerror or str(error)
        warn(f"{path} holds {held} and other users may read it (mode {mode:04o}): {why}")
        return
    warn(f"{path} holds {held} and was open to other users (mode {mode:04o}): now {private:04o}")


def _parse_toml(text: str) -> tuple[dict[str, object] | None, str]:
    """The document, or None and tomllib's reason with its line and column. Quoted parts of the
    reason (a character, a key) are dropped, so that nothing of a value is repeated."""
    try:
        return tomllib.loads(text), ""
    except tomllib.TOMLDecodeError as error:
        message = str(error)
    found = re.search(r"\(at (line \d+, column \d+|end of document)\)$", message)
    reason = message[: found.start()] if found else message
    reason = re.sub(r"\s*('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\([^)]*\))", "", reason).strip()
    return None, f"{found.group(1)}: {reason}" if found else reason


def _check(key: str, value: Value, where: Path | str) -> Value:
    """`value` if the setting's type takes it; otherwise a ConfigError naming `where`."""
    try:
        if isinstance(value, Secret):
            return Secret(cast(str, check_setting(key, value.reveal())))
        return check_setting(key, value)
    except SettingProblem as refused:
        raise ConfigError(refused.line(where)) from None


def _build(values: Mapping[str, Value]) -> Config:
    def get(key: str, default: object) -> object:
        return values.get(key, default)

    local = _memory_is_local(values)
    memory = MemoryConfig(
        model=cast(str, get("memory.model", "")),
        effort=cast(str, get("memory.effort", "high")),
        settle_timeout=cast(float, get("memory.settle_timeout", 20)),
        catch_up_timeout=cast(float, get("memory.catch_up_timeout", 300)),
        concurrency=cast(int, get("memory.concurrency", _default_concurrency(local))),
        deadline=cast(float, get("memory.deadline", 600)),
        context_window=cast(int, get("memory.context_window", 200_000)),
        provider=cast("ProviderName | None", get("memory.provider", None)),
        base_url=cast("str | None", get("memory.base_url", None)),
        yield_to_turns=cast(
            bool, get("memory.yield_to_turns", local and _memory_shares_server(values))
        ),
        min_shared_words=cast(float, get("memory.min_shared_words", MIN_SHARED_WORDS)),
        max_tokens=cast(int, get("memory.max_tokens", COMPACTION_TOKENS)),
        search=cast(bool, get("memory.search", False)),
        api_key=cast("Secret | None", get("memory.api_key", None)),
    )
    tools = ToolPolicies(
        **{name: cast(Policy, get(f"tools.{name}", default)) for name, default in _POLICY_DEFAULTS},
        shell_sandbox=cast(SandboxMode, get("tools.shell_sandbox", "auto")),
        shell_network=cast(NetworkRule, get("tools.shell_network", "allow")),
        fetch_private=cast(bool, get("tools.fetch_private", False)),
        shell_env=variable_names(cast(str, get("tools.shell_env", ""))),
    )
    return Config(
        provider=cast(ProviderName, values["provider"]),
        model=cast(str, get("model", "")),
        base_url=cast("str | None", get("base_url", None)),
        api_key=cast("Secret | None", get("api_key", None)),
        memory=memory,
        turn=TurnConfig(
            effort=cast("str | None", get("turn.effort", None)),
            context_window=cast("int | None", get("turn.context_window", None)),
            tools=cast(ToolSwitch, get("turn.tools", "on")),
        ),
        tools=tools,
        workdir=cast("str | None", get("workdir", None)),
        budget_daily=cast("float | None", get("budget.daily", None)),
        undo_keep_days=cast(float, get("undo.keep_days", 14.0)),
        undo_max_mb=cast(float, get("undo.max_mb", 200.0)),
        store_url=_revealed(get("store.url", None)),
        store_lease_seconds=cast(float, get("store.lease_seconds", 30.0)),
    )


def variable_names(text: str) -> tuple[str, ...]:
    """`tools.shell_env`'s names, in order, once each."""
    return tuple(dict.fromkeys(name for name in re.split(r"[\s,]+", text) if name))


def _revealed(value: object) -> str | None:
    return value.reveal() if isinstance(value, Secret) else cast("str | None", value)


def _memory_is_local(values: Mapping[str, Value]) -> bool:
    return values.get("memory.provider", values["provider"]) in LOCAL_PROVIDERS


def _default_concurrency(local: bool) -> int:
    return LOCAL_CONCURRENCY if local else MAX_CONCURRENCY


def _memory_shares_server(values: Mapping[str, Value]) -> bool:
    """Whether the compactor calls the turns' server: the same provider, and no address of
    its own (or the same one)."""
    if values.get("memory.provider", values["provider"]) != values["provider"]:
        return False
    return values.get("memory.base_url", values.get("base_url")) == values.get("base_url")


_POLICY_DEFAULTS: Final = (
    ("shell", "ask"),
    ("read", "allow"),
    ("write", "ask"),
    ("edit", "ask"),
    ("fetch", "ask"),
)


def _flatten(config: Config) -> dict[str, Value]:
    memory, tools = config.memory, config.tools
    return {
        "provider": config.provider,
        "model": config.model,
        "base_url": config.base_url,
        "api_key": config.api_key,
        "workdir": config.workdir,
        "memory.model": memory.model,
        "memory.effort": memory.effort,
        "memory.settle_timeout": memory.settle_timeout,
        "memory.catch_up_timeout": memory.catch_up_timeout,
        "memory.concurrency": memory.concurrency,
        "memory.deadline": memory.deadline,
        "memory.context_window": memory.context_window,
        "memory.provider": memory.provider,
        "memory.base_url": memory.base_url,
        "memory.yield_to_turns": memory.yield_to_turns,
        "memory.min_shared_words": memory.min_shared_words,
        "memory.max_tokens": memory.max_tokens,
        "memory.search": memory.search,
        "turn.effort": config.turn.effort,
        "turn.context_window": config.turn.context_window,
        "turn.tools": config.turn.tools,
        "tools.shell": tools.shell,
        "tools.read": tools.read,
        "tools.write": tools.write,
        "tools.edit": tools.edit,
        "tools.fetch": tools.fetch,
        "tools.shell_sandbox": tools.shell_sandbox,
        "tools.shell_network": tools.shell_network,
        "tools.fetch_private": tools.fetch_private,
        "tools.shell_env": " ".join(tools.shell_env) or None,
        "budget.daily": config.budget_daily,
        "undo.keep_days": config.undo_keep_days,
        "undo.max_mb": config.undo_max_mb,
        "store.url": None if config.store_url is None else Secret(config.store_url),
        "store.lease_seconds": config.store_lease_seconds,
    }


# --- secrets -------------------------------------------------------------------------------


def secret_values(config: Config | None = None, env: Mapping[str, str] | None = None) -> list[str]:
    """The credentials this process knows: the configured key and every variable's value that
    looks like one (a command or file may print one that is not the configured key), longest
    first so that a key containing another is redacted whole."""
    if env is None:
        env = secret_env.environment()
    values = {env.get(name, "") for name in CREDENTIAL_VARIABLES}
    values.update(value for name, value in env.items() if secret_env.looks_secret(name, value))
    if config is not None and config.api_key is not None:
        values.add(config.api_key.reveal())
    if config is not None:  # a token an MCP server is started with (a server may repeat it)
        values.update(config.mcp.secret_values())
    if config is not None and config.store_url is not None:
        values.update(url_passwords(config.store_url))
    return sorted(filter(is_credential, values), key=len, reverse=True)


def url_passwords(url: str) -> set[str]:
    """The passwords a postgresql:// URL holds, as written and decoded (either may be printed):
    its user's, and those of its query (`?password=`, `?sslpassword=`)."""
    from urllib.parse import parse_qsl, unquote, urlsplit  # only a database's URL needs it

    try:
        parts = urlsplit(url)
    except ValueError:  # unreadable: nothing in it can be told to be a password
        return set()
    found = {parts.password or ""}
    found.update(v for k, v in parse_qsl(parts.query) if k in ("password", "sslpassword"))
    return {form for value in found if value for form in (value, unquote(value))}


def is_credential(value: str) -> bool:
    """Whether a key is a real credential, to be redacted: long enough to be one (a short value
    would blank out parts of ordinary words), and not a placeholder."""
    return len(value) >= SECRET_MIN_LENGTH and value not in PLACEHOLDER_KEYS


# --- writing -------------------------------------------------------------------------------


def save_config(home: Path, config: Config) -> None:
    """Write `<home>/config.toml` (0600, in a 0700 folder, atomically).

    Only the user's settings are written: what the file held (changed or not) and what was changed
    since loading. Values that came from the environment or the defaults stay out of the file, so
    an API key read from a variable is never written, and a default model is not pinned.
    A config made directly (not loaded) writes the values that differ from the defaults.

    The file is changed, not rewritten: its comments, its layout and anything evertalk does not
    know (a table of another tool, a setting of a later version) stay as they were; a setting
    whose value is the same is not touched. A file that is not TOML is left alone (ConfigError).
    """
    for key, value in _flatten(config).items():
        if value is not None and key != "api_key":
            _check(key, value, "config")
    wanted = _to_write(config)
    path = config_path(home)
    text = _update_toml(path, _read_for_update(path), wanted)
    make_dir(home)
    write_atomic(path, text.encode("utf-8"))


NEW_FILE_HEADER: Final = "evertalk settings (evertalk keeps your comments when it saves them)"


def _read_for_update(path: Path) -> str | None:
    """The file's text, or None when there is none yet."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text, so it is not rewritten") from None


def _update_toml(path: Path, text: str | None, wanted: Mapping[str, Value]) -> str:
    """`text` with every setting of KEYS as in `wanted` (None or missing: not in the file)."""
    # tomlkit only here, where the file is written: reading needs only tomllib, and every
    # command (`memory status` too) reads the file, 50 ms sooner without it
    import tomlkit
    from tomlkit.exceptions import ParseError

    if text is None:
        document = tomlkit.document()
        document.add(tomlkit.comment(NEW_FILE_HEADER))
        document.add(tomlkit.nl())
    else:
        try:
            document = tomlkit.parse(text)
        except ParseError as error:  # where, but not what: the text may hold the key
            raise ConfigError(
                f"{path}: not valid TOML (line {error.line}, column {error.col}), so it is not "
                "rewritten: fix it or move it away"
            ) from None
    for key in KEYS:
        table, _, name = key.rpartition(".")
        value = wanted.get(key)
        plain = value.reveal() if isinstance(value, Secret) else value
        holder = document.get(table) if table else document
        if holder is not None and not isinstance(holder, dict):
            raise ConfigError(f"{path}: `{table}` must be a table ([{table}]) to save `{key}`")
        if plain is None:
            if holder is not None and name in holder:
                del holder[name]
            continue
        if holder is None:
            holder = document[table] = tomlkit.table()
        if name in holder and _same(holder[name], plain):
            continue  # as the user wrote it (20 stays 20, not 20.0)
        holder[name] = plain
    return document.as_string()


def _same(written: object, value: object) -> bool:
    """Whether the file's value is already `value` (true is not 1, though Python says so)."""
    return isinstance(written, bool) == isinstance(value, bool) and written == value


def save_models(
    home: Path,
    *,
    model: str | None = None,
    memory_model: str | None = None,
    memory_effort: str | None = None,
) -> None:
    """Change the turn model, or the compaction model and effort, in `<home>/config.toml`; None
    leaves a setting as it is. A bad value, or a file that cannot be read or written, is a
    ConfigError (one line), and then nothing is written."""
    config = load_config(home)
    memory = config.memory
    memory = replace(
        memory,
        model=memory.model if memory_model is None else memory_model,
        effort=memory.effort if memory_effort is None else memory_effort,
    )
    changed = replace(config, model=config.model if model is None else model, memory=memory)
    try:
        save_config(home, changed)
    except OSError as error:
        raise ConfigError(f"cannot write {config_path(home)}: {error.strerror or error}") from None


def save_store_url(home: Path, url: str) -> None:
    """Set `[store] url` in `<home>/config.toml`, every other line of the file kept. A bad URL,
    or a file that cannot be read or written, is a ConfigError (one line), and then nothing is
    written."""
    config = load_config(home)
    try:
        save_config(home, replace(config, store_url=url))
    except OSError as error:
        raise ConfigError(f"cannot write {config_path(home)}: {error.strerror or error}") from None


def _to_write(config: Config) -> dict[str, Value]:
    current = _flatten(config)
    if config.origin is None:
        defaults = _flatten(Config(provider=config.provider))
        # A local server's compaction model follows the turn model unless set apart.
        defaults["memory.model"] = Config(config.provider, config.model).memory.model
        return {k: v for k, v in current.items() if k == "provider" or v != defaults[k]}
    file, loaded = config.origin.file, config.origin.loaded
    wanted: dict[str, Value] = {}
    for key, value in current.items():
        if key in loaded and value == loaded[key]:
            if key in file:
                wanted[key] = file[key]
        else:
            wanted[key] = value
    return wanted
