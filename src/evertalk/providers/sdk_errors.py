"""From an SDK's exception to our error, one mapping for both adapters.

The official Anthropic and OpenAI SDKs are cut from one pattern: the same exception classes
(`APIError`, `APIStatusError`, `APIConnectionError`, `APITimeoutError`) under each vendor's base
error, and error bodies that carry `error.message`. An adapter names its SDK's classes in an
`SdkErrors` table, and `ErrorMap` does the rest. This module imports neither SDK.

Where the two differ, the table says so: whether an error's `type` names its kind (Anthropic's
`overloaded_error` does; OpenAI's `invalid_request_error` is given for a 404 too, so there
the status decides).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx2

from .base import ErrorKind, ProviderError
from .errors import (
    at_address,
    is_validation_error,
    kind_for_status,
    kind_for_type,
    provider_error,
)
from .relay import connect_failed


@dataclass(frozen=True)
class SdkErrors:
    """The names one SDK gives its exceptions, and how its errors are worded."""

    vendor: str  # how our messages name it: "Anthropic", "OpenAI"
    base: type[Exception]  # every error of the SDK (`AnthropicError`, `OpenAIError`)
    api: type[Exception]  # `APIError`: a failure the API answered, a status or not
    status: type[Exception]  # `APIStatusError`
    connection: type[Exception]  # `APIConnectionError`
    timeout: type[Exception]  # `APITimeoutError`
    typed_kinds: bool = False  # whether an error's `type` names its kind


class ErrorMap:
    """Maps an SDK's exception to our error (a `relay.MapError`), its message one clean line
    that names the vendor, and the server where the address may be wrong."""

    def __init__(self, sdk: SdkErrors, url: str, secrets: Sequence[str | None]) -> None:
        self.sdk = sdk
        self.url = url
        self.secrets = tuple(secrets)

    def __call__(self, exc: Exception, started: bool) -> ProviderError:
        """Our error for `exc`; `started`: whether the response had begun. Raises `exc` itself
        when it is none of the SDK's, nor a transport's: a bug, not the server's answer."""
        sdk, vendor = self.sdk, self.sdk.vendor
        if isinstance(exc, ProviderError):
            return exc
        if isinstance(exc, sdk.status):
            return self._status(exc)
        if isinstance(exc, (sdk.timeout, httpx2.TimeoutException)):
            return self._error("timeout", f"{vendor}: the request timed out")
        if isinstance(exc, (sdk.connection, httpx2.HTTPError)):
            if started:
                what = f"the reply stream broke off ({type(exc).__name__})"
                return provider_error("cut", f"{vendor}: {what}")
            return self._connection(exc)
        if isinstance(exc, sdk.api):  # an error object inside the stream
            code = _body(exc).get("code")
            status = code if isinstance(code, int) else None
            kind = kind_for_status(status) if status is not None else "server"
            return self._error(kind, f"{vendor}: {_message(exc)}", status)
        if isinstance(exc, TypeError) and "authentication" in str(exc):
            return self._error("auth", f"{vendor}: no API key is set")
        if isinstance(exc, sdk.base):
            return self._error("auth", f"{vendor}: {exc}")
        if started and isinstance(exc, ValueError):  # a malformed event (bad JSON)
            return provider_error("cut", f"{vendor}: the reply stream was malformed")
        raise exc

    def _status(self, exc: Any) -> ProviderError:
        """An HTTP error status, or an error event in a stream (which comes with the stream's
        200, and its headers, which say nothing of this error)."""
        code: int = exc.status_code
        status = code if code >= 400 else None
        detail = _body_message(_body(exc)) or _message(exc)
        if is_validation_error(code, detail):
            # a 500 that is a refused request: another try would be refused again
            message = f"{self.sdk.vendor}: the server refused the request as invalid: {detail}"
            return self._error("bad_request", message, code, transient=False)
        kind = self._kind(exc, status)
        message = at_address(kind, f"{self.sdk.vendor}: {detail}", self.url)
        headers = exc.response.headers if status is not None else None
        return provider_error(kind, message, status, secrets=self.secrets, headers=headers)

    def _kind(self, exc: Any, status: int | None) -> ErrorKind:
        typed = kind_for_type(getattr(exc, "type", None)) if self.sdk.typed_kinds else None
        return typed or kind_for_status(status)

    def _connection(self, exc: Exception) -> ProviderError:
        """No reply began. A connection never made (refused: nothing listens there) is said at
        once, as final; one that broke before the response is worth another try."""
        refused = connect_failed(exc)
        what = "could not connect" if refused else "the connection broke before the reply began"
        message = at_address("connection", f"{self.sdk.vendor}: {what}", self.url)
        return self._error("connection", message, transient=not refused)

    def _error(
        self,
        kind: ErrorKind,
        message: str,
        status: int | None = None,
        *,
        transient: bool | None = None,
    ) -> ProviderError:
        return provider_error(kind, message, status, secrets=self.secrets, transient=transient)


def _body(exc: Exception) -> dict[str, Any]:
    body = getattr(exc, "body", None)
    return body if isinstance(body, dict) else {}


def _message(exc: Exception) -> str:
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) else str(exc)


def _body_message(body: dict[str, Any]) -> str | None:
    """The error's own words: `error.message` (both APIs), or a bare `message`."""
    error = body.get("error", body)
    if isinstance(error, dict):
        message = error.get("message")
        if isinstance(message, str):
            return message
    return None
