"""Which provider variables a client sees, told to the service without their values.

A service started by one client keeps the environment of that client: a key or a base URL that
was wrong then stays wrong for every later client, even after the user fixed it. So each hello
carries, per variable, a keyed hash of its value (HMAC-SHA256 under a salt the client draws for
this hello; null when unset). The service hashes its own values under the same salt and learns
which variables differ, by name, and nothing of their values: a key never reaches the wire, the
service's log or a message. Standard library only: both sides import it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Final

from evertalk import secret_env

PROVIDER_VARIABLES: Final = (
    "EVERTALK_PROVIDER",
    "EVERTALK_MODEL",
    "EVERTALK_MEMORY_MODEL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENROUTER_API_KEY",
)
"""The variables that change what the service calls, and where, and with which credentials
(config.py reads them). `EVERTALK_WORKDIR` is not one: each message carries its own folder."""


def digest(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What a hello says of the provider variables: a fresh salt and a hash of each."""
    salt = os.urandom(16).hex()  # what secrets.token_hex gives, without loading `random`
    return {"salt": salt, "hashes": _hashes(salt, secret_env.environment() if env is None else env)}


def differing(told: object, env: Mapping[str, str] | None = None) -> list[str]:
    """The names of the variables whose value the client sees otherwise than `env` holds
    them (default: this process's, its sealed credentials included); none when the hello
    said nothing of them (an older client, a program of its own)."""
    env = secret_env.environment() if env is None else env
    if not isinstance(told, dict):
        return []
    salt, hashes = told.get("salt"), told.get("hashes")
    if not isinstance(salt, str) or not salt or not isinstance(hashes, dict):
        return []
    own = _hashes(salt, env)
    return [name for name in PROVIDER_VARIABLES if name in hashes and hashes[name] != own[name]]


def _hashes(salt: str, env: Mapping[str, str]) -> dict[str, str | None]:
    return {name: _hash(salt, name, env.get(name)) for name in PROVIDER_VARIABLES}


def _hash(salt: str, name: str, value: str | None) -> str | None:
    if not value:  # unset and empty read the same (config.py ignores an empty variable)
        return None
    import hashlib  # OpenSSL's, loaded only for a variable that is set
    import hmac

    message = f"{name}\0{value}".encode("utf-8", "surrogatepass")
    return hmac.new(salt.encode(), message, hashlib.sha256).hexdigest()


def changed_line(names: list[str]) -> str:
    """Why a service restarts for a client that sees other provider variables."""
    return f"{_names(names)} changed since the service started"


def kept_line(names: list[str], held_by: str | None) -> str:
    """What a client that sees other provider variables is told while something holds the
    service (`held_by`: what)."""
    return (
        f"service: this client's {_names(names)} {'differs' if len(names) == 1 else 'differ'} "
        f"from what the service started with; it keeps its own while {held_by or 'it runs'}. "
        "To apply yours, wait for that (or run `evertalk service stop`) and run this again"
    )


def _names(names: list[str]) -> str:
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
