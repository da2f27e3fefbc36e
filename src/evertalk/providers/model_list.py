"""The models a provider's server lists, for `/model`: the list, and whether a name is on it.

Each server is asked `GET …/models` as the SDKs' `models.list()` asks it (Anthropic with its
`x-api-key` header, the others with a bearer token), by `server_info`'s plain HTTP client: the
service answers `/model` on its event loop, which importing an SDK would hold up for a second.
The ask is short (`TIMEOUT`), since `/model` waits for it, and its answer is used again for a
while (`KEPT`; `KEPT_FAILED` for a failure), so that `/model` again answers at once. A failure
is one line that names no key and repeats nothing the server sent.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from evertalk import secret_env
from evertalk.config import AUTH_TOKEN_VARIABLE

TIMEOUT: Final = 2.0
"""Seconds the ask may take: `/model` shows its answer, and waits for it."""
KEPT: Final = 300.0
"""Seconds a list is used again before it is asked for anew."""
KEPT_FAILED: Final = 30.0
"""… and a failure, so that a server that does not answer slows one `/model` only."""

ANTHROPIC_URL: Final = "https://api.anthropic.com"
ANTHROPIC_VERSION: Final = "2023-06-01"
OPENAI_URL: Final = "https://api.openai.com/v1"

_DATED = re.compile(r"-\d{8}")
"""Anthropic lists `claude-sonnet-4-5-20250929` and takes `claude-sonnet-4-5` for it."""


@dataclass(frozen=True)
class ModelList:
    """What the server lists (`ids`), or why there is no list (`error`, one line)."""

    ids: tuple[str, ...] = ()
    error: str | None = None


Lister = Callable[[str, str | None, str | None, float], tuple[str, ...]]
"""(provider, key, base URL, timeout) → the ids; raises with what went wrong."""

_kept: dict[tuple[str, str | None, str], tuple[float, ModelList]] = {}


def served_models(
    provider: str,
    api_key: str | None,
    base_url: str | None,
    *,
    timeout: float = TIMEOUT,
    clock: Callable[[], float] = time.monotonic,
    lister: Lister | None = None,
) -> ModelList:
    """The models the provider's server lists, asked at most once in `KEPT` seconds for the
    same server and key."""
    digest = hashlib.sha256((api_key or "").encode()).hexdigest()  # the key is not kept
    where = (provider, base_url, digest)
    now = clock()
    kept = _kept.get(where)
    if kept is not None and now - kept[0] < (KEPT if kept[1].error is None else KEPT_FAILED):
        return kept[1]
    try:
        ids = (lister or _ask)(provider, api_key, base_url, timeout)
        found = ModelList(ids=ids)
    except Exception as error:  # whatever went wrong, /model goes on without a list
        found = ModelList(error=_why(error))
    _kept[where] = (now, found)
    return found


def is_listed(provider: str, name: str, ids: tuple[str, ...]) -> bool:
    """Whether the server takes `name` by its list: listed as it is, or as the short name a
    server also takes (Anthropic's name without its date or with `-latest`, Ollama's tag
    `:latest` left out, OpenRouter's `:free` and other variants of a listed model)."""
    if name in ids or f"{name}:latest" in ids:
        return True
    if provider == "anthropic":
        stem = name.removesuffix("-latest")
        return any(i.startswith(stem) and _DATED.fullmatch(i[len(stem) :]) for i in ids)
    if provider == "openrouter" and ":" in name:
        return name.split(":", 1)[0] in ids
    return False


def _ask(
    provider: str, api_key: str | None, base_url: str | None, timeout: float
) -> tuple[str, ...]:
    from evertalk.providers.factory import LOCAL_BASE_URLS, OPENROUTER_BASE_URL
    from evertalk.server_info import list_model_ids

    headers: dict[str, str] = {}
    if provider == "anthropic":
        # the SDK's address and headers, without the SDK: importing it would hold up the service
        headers["anthropic-version"] = ANTHROPIC_VERSION
        token = secret_env.kept(AUTH_TOKEN_VARIABLE)
        if api_key:
            headers["x-api-key"] = api_key
        elif token:
            headers["Authorization"] = f"Bearer {token}"
        root = (base_url or ANTHROPIC_URL).rstrip("/")
        return list_model_ids(f"{root}/v1", headers=headers, query="limit=1000", timeout=timeout)
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    defaults = {"openai": OPENAI_URL, "openrouter": OPENROUTER_BASE_URL, **LOCAL_BASE_URLS}
    return list_model_ids(base_url or defaults[provider], headers=headers, timeout=timeout)


def _why(error: Exception) -> str:
    """One line for the failure. The listing's own say what went wrong and name no key; any
    other is a bug of ours, named by its kind."""
    from evertalk.server_info import ServerInfoError

    if isinstance(error, ServerInfoError):
        return str(error)
    return f"the list could not be read ({type(error).__name__})"
