"""What a local OpenAI-compatible server serves: its models and, where it says, their windows.

`list_models(base_url)` asks `GET {base_url}/models` (base URLs end in `/v1`), then, as each
kind of server tells more elsewhere:

- vLLM puts `max_model_len` on each model: the window it runs the model with.
- llama.cpp's server puts `meta.n_ctx_train` on each model (what the model was trained for) and
  the window it runs with, per slot, in `GET /props` at its root: `default_generation_settings.
  n_ctx` (newer builds also a top-level `n_ctx`). llama-cpp-python lists models only.
- Ollama's `POST /api/show` (at its root) gives the model's `<arch>.context_length`: what the
  model supports, not what Ollama runs it with (`num_ctx`, small unless OLLAMA_CONTEXT_LENGTH or
  the model's own parameters raise it). A `num_ctx` among those parameters is the real one.

The standard library only (`urllib`): the setup form calls this from a worker thread, and
importing an SDK would cost the app's start seconds. Every failure is a ServerInfoError of one
line; no message holds the key, the URL's credentials or anything the server sent back.
"""

from __future__ import annotations

import json
import re
import socket
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Final

TIMEOUT: Final = 3.0
"""Seconds each request may take: a server on this machine answers in milliseconds."""
MAX_BODY: Final = 4 * 1024 * 1024
"""The most of an answer read: a model list is a few kilobytes."""

OLLAMA_CAVEAT: Final = (
    "Ollama runs it with a smaller num_ctx unless OLLAMA_CONTEXT_LENGTH says otherwise "
    "(`ollama ps` shows the one in use)"
)
TRAINED_CAVEAT: Final = "the server may run it with less (its --ctx-size)"


class ServerInfoError(Exception):
    """The server could not be asked, or its answer not read: one line, for the form."""


@dataclass(frozen=True)
class Window:
    """A model's context window as the server reports it."""

    tokens: int
    source: str  # where the number comes from, said to the user
    caveat: str = ""  # why it may not be the window the server runs with; "" when it is

    @property
    def runs_with(self) -> bool:
        """Whether this is the window the server runs the model with (not only its maximum)."""
        return not self.caveat


@dataclass(frozen=True)
class ServedModel:
    id: str
    window: Window | None = None


@dataclass(frozen=True)
class ServerInfo:
    url: str  # the base URL asked, without credentials
    models: tuple[ServedModel, ...]

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(model.id for model in self.models)

    def get(self, model_id: str) -> ServedModel | None:
        return next((model for model in self.models if model.id == model_id), None)


def list_models(
    base_url: str,
    *,
    provider: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    timeout: float = TIMEOUT,
) -> ServerInfo:
    """The models the server at `base_url` serves, with the windows it reports. `provider`
    (ollama, llamacpp, vllm) says where else to look; `model` is the one Ollama is asked about
    (else its first); `api_key`, if any, is sent as a bearer token."""
    base = _checked(base_url.strip().rstrip("/"))
    client = _Client(base, api_key, timeout)
    answer = client.fetch_json("GET", f"{base}/models")
    entries = _entries(answer, client.shown(f"{base}/models"))
    models = [_model(entry) for entry in entries]
    if provider == "llamacpp" or any(isinstance(entry.get("meta"), dict) for entry in entries):
        models = _with_props(client, models)
    if provider == "ollama":
        models = _with_ollama_show(client, models, model)
    return ServerInfo(client.shown(base), tuple(models))


def list_model_ids(
    base_url: str, *, headers: Mapping[str, str], query: str = "", timeout: float = TIMEOUT
) -> tuple[str, ...]:
    """The ids `GET {base_url}/models?{query}` lists, asked with `headers` (a hosted API's own:
    Anthropic wants `x-api-key`), and nothing more: its answer has the same `data` list."""
    base = _checked(base_url.strip().rstrip("/"))
    client = _Client(base, None, timeout, headers)
    url = f"{base}/models" + (f"?{query}" if query else "")
    return tuple(
        str(entry["id"]) for entry in _entries(client.fetch_json("GET", url), client.shown(url))
    )


def _checked(base: str) -> str:
    """`base` if urllib can ask it, else the ServerInfoError that says why not."""
    try:
        parts = urllib.parse.urlsplit(base)
        parts.port  # noqa: B018 - raises ValueError for a port that is no number
    except ValueError:
        raise ServerInfoError(f"not a server address: {_Client.shown(base)}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ServerInfoError("the server's address starts with http:// or https://")
    return base


def _entries(answer: object, shown: str) -> list[dict[str, Any]]:
    """The model entries of an OpenAI `GET /models` answer."""
    if isinstance(answer, dict) and answer.get("data", []) is None:
        return []  # Ollama with no model pulled sends `"data": null`
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        raise ServerInfoError(f"{shown} sent no model list: is it an OpenAI-compatible server?")
    return [entry for entry in data if isinstance(entry, dict) and _text(entry.get("id"))]


def _model(entry: dict[str, Any]) -> ServedModel:
    model_id = str(entry["id"])
    if (tokens := _tokens(entry.get("max_model_len"))) is not None:
        return ServedModel(model_id, Window(tokens, "vLLM's max_model_len"))
    meta = entry.get("meta")
    if isinstance(meta, dict) and (tokens := _tokens(meta.get("n_ctx_train"))) is not None:
        source = "the model's n_ctx_train, its training window"
        return ServedModel(model_id, Window(tokens, source, TRAINED_CAVEAT))
    return ServedModel(model_id)


def _with_props(client: _Client, models: list[ServedModel]) -> list[ServedModel]:
    """llama.cpp's runtime window, from `/props`. It describes the one model the server
    runs; a server that lists several (its router mode) says so per model, not here."""
    if len(models) != 1:
        return models
    props = client.optional("GET", f"{client.root}/props")
    settings = props.get("default_generation_settings") if props else None
    tokens = _tokens(settings.get("n_ctx")) if isinstance(settings, dict) else None
    if tokens is None and props:
        tokens = _tokens(props.get("n_ctx"))
    if tokens is None:
        return models  # llama-cpp-python has no /props: its list is all there is
    return [ServedModel(models[0].id, Window(tokens, "the server's n_ctx in /props"))]


def _with_ollama_show(
    client: _Client, models: list[ServedModel], wanted: str | None
) -> list[ServedModel]:
    """Ollama's window for one model (each costs a request): the one named, else the first."""
    name = wanted.strip() if wanted and wanted.strip() else (models[0].id if models else "")
    if name not in {model.id for model in models}:
        return models
    shown = client.optional("POST", f"{client.root}/api/show", {"model": name})
    window = _ollama_window(shown) if shown else None
    if window is None:
        return models
    return [ServedModel(m.id, window) if m.id == name else m for m in models]


NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


def _ollama_window(shown: dict[str, Any]) -> Window | None:
    parameters = shown.get("parameters")
    if isinstance(parameters, str) and (found := NUM_CTX.search(parameters)):
        return Window(int(found.group(1)), "the num_ctx Ollama gives the model")
    info = shown.get("model_info")
    if not isinstance(info, dict):
        return None
    arch = info.get("general.architecture")
    tokens = _tokens(info.get(f"{arch}.context_length")) if isinstance(arch, str) else None
    if tokens is None:  # no architecture named: any `<arch>.context_length` there is
        found_any = (v for k, v in info.items() if k.endswith(".context_length"))
        tokens = next(filter(None, map(_tokens, found_any)), None)
    if tokens is None:
        return None
    return Window(tokens, "the model's context_length in Ollama", OLLAMA_CAVEAT)


def _tokens(value: object) -> int | None:
    """A positive whole number of tokens, else None (JSON's true is no number here)."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return value


def _text(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())


# --- HTTP ------------------------------------------------------------------------------------


class _Client:
    def __init__(
        self,
        base: str,
        api_key: str | None,
        timeout: float,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.base = base
        self.headers = dict(headers or {})
        # `/props` and `/api/show` are at the server's root, not under its `/v1`
        self.root = base[: -len("/v1")] if base.endswith("/v1") else base
        self.api_key = api_key
        self.timeout = timeout

    @staticmethod
    def shown(url: str) -> str:
        """The URL as messages show it: no `user:password@`, no query (either may hold a key)."""
        parts = urllib.parse.urlsplit(url)
        host = parts.netloc.rpartition("@")[2]
        return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))

    def fetch_json(self, method: str, url: str, body: dict[str, Any] | None = None) -> object:
        raw = self._fetch(method, url, body)
        try:
            return json.loads(raw)
        except ValueError:  # bad JSON or bad UTF-8
            raise ServerInfoError(
                f"{self.shown(url)} did not answer with JSON: is it an OpenAI-compatible server?"
            ) from None

    def optional(
        self, method: str, url: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any] | None:
        """An extra a server may lack (a 404 from vLLM, llama-cpp-python): None then."""
        try:
            answer = self.fetch_json(method, url, body)
        except ServerInfoError:
            return None
        return answer if isinstance(answer, dict) else None

    def _fetch(self, method: str, url: str, body: dict[str, Any] | None) -> bytes:
        # imported here, in the worker thread: with `http.client` and `email` they would add
        # some 20 ms to the start of every evertalk, which imports the form
        import http.client
        import urllib.error
        import urllib.request

        request = urllib.request.Request(url, method=method)
        request.add_header("Accept", "application/json")
        if self.api_key:
            request.add_header("Authorization", f"Bearer {self.api_key}")
        for name, value in self.headers.items():
            request.add_header(name, value)
        if body is not None:
            request.data = json.dumps(body).encode()
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                data: bytes = response.read(MAX_BODY)
                return data
        except urllib.error.HTTPError as error:  # before URLError: it is one
            error.close()
            raise ServerInfoError(self._status(url, error.code)) from None
        except urllib.error.URLError as error:
            raise ServerInfoError(self._unreachable(error.reason)) from None
        except TimeoutError:  # while reading (a connection's is a URLError)
            raise ServerInfoError(self._late()) from None
        except (http.client.HTTPException, OSError) as error:
            raise ServerInfoError(self._broken(url, error)) from None

    def _status(self, url: str, code: int) -> str:
        # the standard phrase, not the server's own (which it could fill with anything)
        line = f"{self.shown(url)} answered HTTP {code}" + _phrase(code)
        if code in (401, 403):
            return line + ": the server wants an API key (api_key in config.toml)"
        if code == 404 and not self.base.endswith("/v1"):
            return line + ": a server's OpenAI-compatible address usually ends in /v1"
        return line

    def _unreachable(self, reason: object) -> str:
        at = self.shown(self.base)
        if isinstance(reason, ConnectionRefusedError):
            return f"no server answers at {at}: is it running?"
        if isinstance(reason, TimeoutError):
            return self._late()
        if isinstance(reason, socket.gaierror):
            host = urllib.parse.urlsplit(at).hostname or at
            return f"cannot find the host {host} (of {at})"
        if isinstance(reason, OSError) and reason.strerror:
            return f"cannot reach {at}: {_one_line(reason.strerror)}"
        return f"cannot reach {at}: {_one_line(str(reason))}"

    def _late(self) -> str:
        seconds = f"{self.timeout:g}"
        return f"the server at {self.shown(self.base)} did not answer within {seconds} s"

    def _broken(self, url: str, error: Exception) -> str:
        if isinstance(error, ConnectionRefusedError):
            return self._unreachable(error)
        what = type(error).__name__
        return f"{self.shown(url)} broke off its answer ({what}): is it an HTTP server?"


def _phrase(code: int) -> str:
    try:
        return f" {HTTPStatus(code).phrase}"
    except ValueError:  # a status of the server's own
        return ""


def _one_line(text: str) -> str:
    return " ".join(text.split())[:200]
