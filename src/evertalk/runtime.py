"""The pieces a running evertalk shares, made once from the home folder at start-up.

The system prompt and the user's instructions are read here, once per process: they must be
byte-identical on every call (SPEC §5), so an edit takes effect at the next start.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from evertalk import secret_env
from evertalk.config import (
    AUTH_TOKEN_VARIABLE,
    KEY_VARIABLES,
    LOCAL_PROVIDERS,
    Config,
    ConfigError,
    Secret,
    config_path,
    load_config,
)

if TYPE_CHECKING:
    from evertalk.compactor.service import CompactorSettings
    from evertalk.providers.base import Provider, Request, Tool
    from evertalk.providers.lane import TurnLane

INSTRUCTIONS_NAME = "instructions.md"

CacheRole = Literal["turn", "subagent", "compaction"]


@dataclass(frozen=True)
class Runtime:
    home: Path
    config: Config
    system: str  # the system prompt + the user's instructions, fixed for this process

    @classmethod
    def load(cls, home: Path) -> Runtime:
        # the prompts and tool definitions load here, not with the module: the terminal app and
        # the other clients use this module's checks and never build a prompt
        from evertalk.prompts import system_text, system_text_without_tools

        config = load_config(home)
        compose = system_text if config.turn.tools == "on" else system_text_without_tools
        return cls(home, config, compose(read_instructions(home)))

    @property
    def tools(self) -> list[Tool]:
        """The tools every call carries: all of them, or none with `[turn] tools = "off"`.
        Compactions carry the turns' list too, so that both keep one cached prefix (SPEC §4.2)."""
        from evertalk.prompts import TOOLS
        from evertalk.search_tool import SEARCH

        if self.config.turn.tools != "on":
            return []
        return [*TOOLS, SEARCH] if self.config.memory.search else TOOLS  # opt-in (search_tool)

    def provider(self) -> Provider:
        """The configured provider, its calls passing through one prefix gate (SPEC §4.6). Its
        SDK is loaded at the first call, in a worker thread (`LazyProvider`)."""
        config = self.config
        return _gated(config.provider, config.api_key, config.base_url)

    def memory_provider(self, turns: Provider | None = None) -> Provider:
        """The compactor's provider: `turns` itself when the compactor calls the turns' server
        (one prefix gate for both, SPEC §4.6), else one of its own (`[memory] provider` and
        `base_url`), which the caller closes."""
        config = self.config
        if turns is not None and config.memory_shares_server:
            return turns
        return _gated(config.memory_provider, config.memory_api_key, config.memory_base_url)

    def turn_lane(self) -> TurnLane | None:
        """The lane by which turns go first on the server they share with the compactor
        (`[memory] yield_to_turns`); None when compactions do not yield."""
        from evertalk.providers.lane import TurnLane

        return TurnLane() if self.config.memory.yield_to_turns else None

    def compactor_settings(self) -> CompactorSettings:
        from evertalk.compactor.service import CompactorSettings

        memory = self.config.memory
        return CompactorSettings(
            model=memory.model,
            effort=memory.effort or None,
            concurrency=memory.concurrency,
            deadline=memory.deadline,
            context_window=memory.context_window,
            cache_key=cache_key(self.home, "compaction"),
            max_tokens=memory.max_tokens,
            local=self.config.memory_provider in LOCAL_PROVIDERS,
            min_shared=memory.min_shared_words,
        )


def _gated(kind: str, api_key: Secret | None, base_url: str | None) -> Provider:
    """A provider of `kind` whose calls pass through a prefix gate of its own."""
    from evertalk.providers.factory import make_provider
    from evertalk.providers.gate import GatedProvider, PrefixGate
    from evertalk.providers.layout import prefix_keys
    from evertalk.providers.lazy import LazyProvider

    key = api_key.reveal() if api_key else None
    inner = LazyProvider(kind, lambda: make_provider(kind, key, base_url))

    def keys(request: Request) -> list[str]:
        return [f"{kind}|{prefix}" for prefix in prefix_keys(request)]

    return GatedProvider(inner, PrefixGate(), keys)


def cache_key(home: Path, role: CacheRole) -> str:
    """The OpenAI `prompt_cache_key` of one chat and role (SPEC §7): the same on every start,
    and well under the API's 64 characters. The home's path is hashed, since it names the user;
    16 hex digits keep two homes apart."""
    where = str(home.resolve()).encode("utf-8", "surrogateescape")
    return f"evertalk-{role}-{hashlib.sha256(where).hexdigest()[:16]}"


def read_instructions(home: Path) -> str:
    """The user's instructions; "" when there are none. A file that cannot be used is a
    ConfigError naming it: every entry point reports those as one line, and a turn must not
    run without the instructions the user wrote."""
    path = home / INSTRUCTIONS_NAME
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None


def configuration_problem(home: Path, config: Config) -> str | None:
    """Why no model can be called with these settings, or None."""
    variable = KEY_VARIABLES.get(config.provider)
    if config.api_key is not None or variable is None:
        return None  # a local server needs no key
    if config.provider == "anthropic" and secret_env.kept(AUTH_TOKEN_VARIABLE):
        return None
    return (
        f"no provider is configured: set {variable}, or api_key in {config_path(home)} "
        "(running evertalk in a terminal sets one up)"
    )
