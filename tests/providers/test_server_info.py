"""Asking a local server what it serves: each kind's model list and window, over real HTTP on
loopback (the OpenAI fake for vLLM's way, a small server here for the others' raw answers), and
each failure as one line that names no key."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evertalk.server_info import ServerInfoError, list_models
from fakes import OpenAIFake, serve

KEY = "sk-local-SECRET-4242424242"


@dataclass
class Answer:
    status: int = 200
    body: object = None  # JSON, or bytes sent as they are
    delay: float = 0.0
    reason: str | None = None  # the status line's phrase, when not the standard one


@dataclass
class Asked:
    method: str
    path: str
    headers: dict[str, str]
    body: object


@dataclass
class Server:
    """Answers by (method, path); anything else is a 404. Records what it was asked."""

    routes: dict[tuple[str, str], Answer]
    asked: list[Asked] = field(default_factory=list)
    url: str = ""

    @property
    def base(self) -> str:
        return f"{self.url}/v1"


@contextmanager
def running(routes: dict[tuple[str, str], Answer]) -> Iterator[Server]:
    server = Server(routes)

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            server.asked.append(Asked(self.command, self.path, dict(self.headers), body))
            answer = server.routes.get((self.command, self.path), Answer(404, {"error": "no"}))
            time.sleep(answer.delay)
            data = answer.body
            sent = data if isinstance(data, bytes) else json.dumps(data).encode()
            with suppress(ConnectionError):  # a client that gave up waiting has gone
                self.send_response(answer.status, answer.reason)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(sent)))
                self.end_headers()
                self.wfile.write(sent)

        do_GET = do_POST = _answer

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet tests

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()


def models(*entries: Mapping[str, object]) -> dict[tuple[str, str], Answer]:
    return {("GET", "/v1/models"): Answer(body={"object": "list", "data": list(entries)})}


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def failure(base_url: str, **options: object) -> str:
    with pytest.raises(ServerInfoError) as caught:
        list_models(base_url, **options)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "\n" not in message and message.strip() == message and message
    assert caught.value.__cause__ is None  # raised `from None`: no chained traceback
    return message


# -- each kind of server ----------------------------------------------------------------------


def test_vllm_gives_each_models_max_model_len() -> None:
    fake = OpenAIFake(models=["qwen3-8b", "llama-3.1-8b"], max_model_len={"qwen3-8b": 32_768})
    with serve(fake) as url:
        info = list_models(f"{url}/v1", provider="vllm")
    assert info.ids == ("qwen3-8b", "llama-3.1-8b") and info.url == f"{url}/v1"
    qwen, llama = info.models
    assert qwen.window is not None and qwen.window.tokens == 32_768 and qwen.window.runs_with
    assert "max_model_len" in qwen.window.source
    assert llama.window is None
    assert info.get("llama-3.1-8b") is llama and info.get("other") is None


def test_the_fake_without_models_has_no_list() -> None:
    with serve(OpenAIFake()) as url:  # as before the option: no /v1/models
        assert failure(f"{url}/v1") == f"{url}/v1/models answered HTTP 404 Not Found"


def test_llamacpp_runs_with_the_n_ctx_of_its_props() -> None:
    routes = models({"id": "qwen.gguf", "object": "model", "meta": {"n_ctx_train": 131_072}})
    routes["GET", "/props"] = Answer(body={"default_generation_settings": {"n_ctx": 8_192}})
    with running(routes) as server:
        info = list_models(server.base)  # recognised by its `meta`: no provider named
    window = info.models[0].window
    assert window is not None and (window.tokens, window.runs_with) == (8_192, True)
    assert window.source == "the server's n_ctx in /props"
    assert [asked.path for asked in server.asked] == ["/v1/models", "/props"]


def test_a_newer_llamacpp_may_say_n_ctx_at_the_top_of_props() -> None:
    routes = models({"id": "m", "meta": {"n_ctx_train": 32_768}})
    routes["GET", "/props"] = Answer(body={"n_ctx": 4_096})
    with running(routes) as server:
        window = list_models(server.base, provider="llamacpp").models[0].window
    assert window is not None and window.tokens == 4_096 and window.runs_with


def test_without_props_the_training_window_comes_with_a_caveat() -> None:
    with running(models({"id": "m", "meta": {"n_ctx_train": 131_072}})) as server:
        window = list_models(server.base, provider="llamacpp").models[0].window
    assert window is not None and window.tokens == 131_072 and not window.runs_with
    assert "n_ctx_train" in window.source and "--ctx-size" in window.caveat


def test_llama_cpp_python_lists_models_only() -> None:
    entry = {"id": "smollm2", "object": "model", "owned_by": "me", "permissions": []}
    with running(models(entry)) as server:
        info = list_models(server.base, provider="llamacpp")
    assert info.ids == ("smollm2",) and info.models[0].window is None
    assert [asked.path for asked in server.asked] == ["/v1/models", "/props"]  # a 404, no harm


def ollama(show: Mapping[str, object]) -> dict[tuple[str, str], Answer]:
    routes = models({"id": "qwen3:8b", "owned_by": "library"}, {"id": "llama3.2:latest"})
    routes["POST", "/api/show"] = Answer(body=show)
    return routes


QWEN_INFO = {"model_info": {"general.architecture": "qwen3", "qwen3.context_length": 40_960}}


def test_ollama_says_what_the_model_supports_not_what_it_runs() -> None:
    with running(ollama(QWEN_INFO)) as server:
        info = list_models(server.base, provider="ollama")
    qwen, llama = info.models
    assert qwen.window is not None and qwen.window.tokens == 40_960
    assert not qwen.window.runs_with and "OLLAMA_CONTEXT_LENGTH" in qwen.window.caveat
    assert llama.window is None  # one /api/show only: the model named, else the first
    shows = [asked for asked in server.asked if asked.path == "/api/show"]
    assert [(asked.method, asked.body) for asked in shows] == [("POST", {"model": "qwen3:8b"})]


def test_ollama_is_asked_about_the_model_named() -> None:
    with running(ollama(QWEN_INFO)) as server:
        info = list_models(server.base, provider="ollama", model="llama3.2:latest")
        assert server.asked[-1].body == {"model": "llama3.2:latest"}
        list_models(server.base, provider="ollama", model="not-pulled")
        assert server.asked[-1].path == "/v1/models"  # not listed: not asked about
    assert info.get("llama3.2:latest") is not None and info.models[0].window is None


def test_ollamas_num_ctx_is_the_window_it_runs_with() -> None:
    show = {**QWEN_INFO, "parameters": 'stop "<|im_end|>"\nnum_ctx                        16384'}
    with running(ollama(show)) as server:
        window = list_models(server.base, provider="ollama").models[0].window
    assert window is not None and (window.tokens, window.runs_with) == (16_384, True)


def test_an_ollama_with_no_model_pulled_lists_none() -> None:
    routes = {("GET", "/v1/models"): Answer(body={"object": "list", "data": None})}
    with running(routes) as server:
        assert list_models(server.base, provider="ollama").models == ()


# -- failures: one line each --------------------------------------------------------------------


def test_a_refused_connection_asks_whether_the_server_runs() -> None:
    base = f"http://127.0.0.1:{closed_port()}/v1"
    assert failure(base) == f"no server answers at {base}: is it running?"


def test_a_server_that_does_not_answer_in_time() -> None:
    routes = {("GET", "/v1/models"): Answer(body={"data": []}, delay=1.0)}
    with running(routes) as server:
        message = failure(server.base, timeout=0.2)
    assert message == f"the server at {server.base} did not answer within 0.2 s"


def test_an_http_error_names_its_status() -> None:
    with running({}) as server:
        assert failure(server.base) == f"{server.base}/models answered HTTP 404 Not Found"
        message = failure(server.url)  # the /v1 left out
    assert message == (
        f"{server.url}/models answered HTTP 404 Not Found: "
        "a server's OpenAI-compatible address usually ends in /v1"
    )


def test_an_answer_that_is_not_json_or_no_list() -> None:
    routes = {("GET", "/v1/models"): Answer(body=b"<html>hello</html>")}
    with running(routes) as server:
        assert failure(server.base) == (
            f"{server.base}/models did not answer with JSON: is it an OpenAI-compatible server?"
        )
        server.routes["GET", "/v1/models"] = Answer(body={"object": "list"})
        no_list = "sent no model list: is it an OpenAI-compatible server?"
        assert failure(server.base) == f"{server.base}/models {no_list}"


def test_an_address_that_is_no_http_url() -> None:
    assert failure("localhost:11434/v1") == "the server's address starts with http:// or https://"
    assert failure("ftp://127.0.0.1/v1") == "the server's address starts with http:// or https://"
    assert failure("http://127.0.0.1:port/v1") == "not a server address: http://127.0.0.1:port/v1"


def test_no_key_reaches_a_message() -> None:
    refused = f"http://user:{KEY}@127.0.0.1:{closed_port()}/v1?api_key={KEY}"
    assert KEY not in failure(refused)
    echo = Answer(401, {"error": f"wrong key {KEY}"}, reason=f"Bad key {KEY}")
    with running({("GET", "/v1/models"): echo}) as server:
        message = failure(server.base, api_key=KEY)
        assert server.asked[0].headers["Authorization"] == f"Bearer {KEY}"  # it was sent
    assert KEY not in message
    assert message == (
        f"{server.base}/models answered HTTP 401 Unauthorized: "
        "the server wants an API key (api_key in config.toml)"
    )


def test_the_key_goes_to_every_request_and_no_key_sends_none() -> None:
    routes = models({"id": "m", "meta": {}})
    with running(routes) as server:
        info = list_models(server.base, api_key=KEY)
        list_models(server.base)
    assert KEY not in repr(info)
    sent = [asked.headers.get("Authorization") for asked in server.asked]
    assert sent == [f"Bearer {KEY}", f"Bearer {KEY}", None, None]
