"""Shared pieces of the adapters' error mapping: kinds from statuses, one clean line of text."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from evertalk.config import redact, secret_values

from .base import ErrorKind, ProviderError

MESSAGE_LIMIT = 300
"""Longest error message kept, in characters."""

_STATUS_KINDS: dict[int, ErrorKind] = {
    400: "bad_request",
    401: "auth",
    402: "auth",
    403: "auth",
    404: "not_found",
    408: "timeout",
    413: "bad_request",
    422: "bad_request",
    429: "rate_limit",
    504: "timeout",
    529: "overloaded",
}

_TYPE_KINDS: dict[str, ErrorKind] = {
    # Anthropic's `error.type` values, which also arrive in a stream's `error` event
    "invalid_request_error": "bad_request",
    "request_too_large": "bad_request",
    "authentication_error": "auth",
    "permission_error": "auth",
    "billing_error": "auth",
    "not_found_error": "not_found",
    "rate_limit_error": "rate_limit",
    "overloaded_error": "overloaded",
    "api_error": "server",
    "timeout_error": "timeout",
}


def kind_for_status(status: int | None) -> ErrorKind:
    if status is None:
        return "server"
    kind = _STATUS_KINDS.get(status)
    if kind is not None:
        return kind
    return "server" if status >= 500 else "bad_request"


def kind_for_type(error_type: object) -> ErrorKind | None:
    return _TYPE_KINDS.get(error_type) if isinstance(error_type, str) else None


def clean(message: str, secrets: Iterable[str | None]) -> str:
    """One line, no secret in it, not too long. Besides the adapter's own `secrets`, the
    credential variables' values go too: an SDK may have used one the adapter never saw."""
    known = [secret for secret in secrets if secret]
    message = redact(message, sorted(known, key=len, reverse=True))
    message = redact(message, secret_values())
    line = " ".join(message.split())
    if len(line) > MESSAGE_LIMIT:
        line = line[: MESSAGE_LIMIT - 1] + "…"
    return line


def provider_error(
    kind: ErrorKind,
    message: str,
    status: int | None = None,
    *,
    secrets: Iterable[str | None] = (),
) -> ProviderError:
    return ProviderError(kind, clean(message, secrets), status)


def address(base_url: str) -> str:
    """The server an error is about, for the user to check: scheme, host, port and path, never
    a user name or password written into the URL, nor its query."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}".rstrip("/")


def at_address(kind: ErrorKind, message: str, base_url: str) -> str:
    """`message`, naming the server when the error may come from a wrong address."""
    if kind in ("connection", "not_found"):
        return f"{message} (at {address(base_url)})"
    return message
