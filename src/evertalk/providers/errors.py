"""Shared pieces of the adapters' error mapping: kinds from statuses, one clean line of text."""

from __future__ import annotations

import email.utils
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping
from urllib.parse import urlsplit

from evertalk.config import is_credential, redact, secret_values

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
    credential variables' values go too: an SDK may have used one the adapter never saw. Only
    credentials are redacted: not the placeholder key of a local server (`local`), which would
    turn every `localhost` in an error into `[redacted]host`."""
    known = [secret for secret in secrets if secret and is_credential(secret)]
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
    headers: Mapping[str, str] | None = None,
    transient: bool | None = None,
) -> ProviderError:
    """Our error, its message cleaned. `headers`: those of the HTTP error response, which may
    say when to try again (`retry-after`) or not to (`x-should-retry: false`)."""
    retry_after = None
    if headers is not None:
        transient = should_retry(headers) if transient is None else transient
        retry_after = retry_after_seconds(headers)
    return ProviderError(
        kind, clean(message, secrets), status, transient=transient, retry_after=retry_after
    )


def should_retry(headers: Mapping[str, str]) -> bool | None:
    """The server's own word on another try (`x-should-retry`, which the Anthropic and OpenAI
    APIs send with their errors); None when it says nothing."""
    value = headers.get("x-should-retry", "").strip().lower()
    return {"true": True, "false": False}.get(value)


def retry_after_seconds(
    headers: Mapping[str, str], now: Callable[[], float] = time.time
) -> float | None:
    """How long the server asked to wait: `retry-after-ms`, else `retry-after` in seconds or
    as an HTTP date; None when it did not say (or said nonsense)."""
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        try:
            seconds = float(headers.get(name, "")) * scale
        except ValueError:
            continue
        if math.isfinite(seconds) and seconds >= 0:
            return seconds
    date = headers.get("retry-after")
    if not date:
        return None
    try:
        when = email.utils.parsedate_to_datetime(date)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now()) if when.tzinfo is not None else None


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


_VALIDATION = re.compile(r"\bvalidation errors?\b|\bValidationError\b", re.IGNORECASE)
"""How pydantic-based servers (llama-cpp-python, FastAPI) word a request they could not
validate: `1 validation error for ChatCompletionRequestAssistantMessage …`."""


def is_validation_error(status: int, message: str) -> bool:
    """Whether an HTTP 5xx is in fact the server refusing the request's shape. Some servers
    (llama-cpp-python) answer a request they cannot validate with a 500, which looks
    transient; the same request sent again is certain to fail the same way."""
    return status >= 500 and _VALIDATION.search(message) is not None


CUT_BY_SERVER = (
    "the server cut the reply short: another request interrupted it, "
    "or the prompt exceeded its context"
)
"""What a stream that ends without a finish reason (`data: [DONE]` or the end of the body), or
a 200 with an empty body, most likely means: local servers do both, silently, when a second
request takes their only slot or when the prompt does not fit their context."""

_PREVENTION: dict[str, str] = {
    "llamacpp": (
        "llama.cpp's server: more slots (--parallel/-np) or a larger context (--ctx-size/-c); "
        "llama-cpp-python's server: --interrupt_requests False or a larger --n_ctx"
    ),
    "ollama": "raise OLLAMA_NUM_PARALLEL or OLLAMA_CONTEXT_LENGTH",
    "vllm": "start vLLM with a larger --max-model-len",
}
_GENERIC_PREVENTION = "let the server take more requests at once, or give it a larger context"


def cut_by_server(provider: str) -> str:
    """The one line for a reply the server ended without saying why, with what prevents it on
    the server `provider` names (llamacpp, ollama, vllm), or in general terms for the others."""
    return f"{CUT_BY_SERVER}; to prevent it: {_PREVENTION.get(provider, _GENERIC_PREVENTION)}"
