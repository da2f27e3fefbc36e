"""The browse server over HTTP: the token, the Host check, read-only, the JSON it serves, and a
page that follows the chat as it grows."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from typing import Any

from browse.browse_chat import HOSTILE
from browse.conftest import Served
from evertalk.browse.data import line_of
from evertalk.chat import Chat


def request(
    served: Served, path: str, *, method: str = "GET", host: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    port = served.server.port
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Host": host if host is not None else f"127.0.0.1:{port}"}
    connection.request(method, path, headers=headers)
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, dict(response.getheaders()), body


def api(served: Served, path: str) -> Any:
    status, _, body = request(served, f"/{served.server.token}/{path}")
    assert status == 200, body
    return json.loads(body)


def test_every_path_needs_the_token(served: Served) -> None:
    token = served.server.token
    assert request(served, f"/{token}/api/view")[0] == 200
    wrong = token[:-1] + ("y" if token[-1] != "y" else "z")  # one character off
    for path in ("/api/view", "/", f"/{wrong}/api/view", f"/x{token}/", "/page.js"):
        status, _, body = request(served, path)
        assert status == 403, path
        assert b"summary" not in body


def test_another_host_name_is_refused(served: Served) -> None:
    """DNS rebinding: a page of evil.example resolved to 127.0.0.1 sends its own name."""
    port = served.server.port
    path = f"/{served.server.token}/api/view"
    assert request(served, path, host=f"evil.example:{port}")[0] == 403
    assert request(served, path, host="127.0.0.1:1")[0] == 403
    assert request(served, path, host=f"localhost:{port}")[0] == 200


def test_it_is_read_only_and_forbids_other_origins(served: Served) -> None:
    path = f"/{served.server.token}/api/view"
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert request(served, path, method=method)[0] == 405
    status, headers, body = request(served, f"/{served.server.token}/")
    assert status == 200 and b'<script src="page.js">' in body
    policy = headers["Content-Security-Policy"]
    assert "default-src 'self'" in policy and "img-src 'self' data:" in policy
    assert headers["X-Content-Type-Options"] == "nosniff"


def test_the_view_is_the_chats_view(served: Served) -> None:
    view = api(served, "api/view")
    with Chat.open(served.chat_dir, readonly=True) as chat:
        tree = chat.core.tree
        expected = [
            line_of(node, chat.text_of(node), tree.line_size(node)) for node in chat.core.view
        ]
        assert view["t"] == chat.t == 60
        rendered = chat.render_view().split("\n")[1:-1]
    assert view["lines"] == expected
    assert view["lines"][0]["level"] > 0  # the small budget merged the oldest lines
    for line, text in zip(view["lines"], rendered, strict=True):
        shown = line["text"] if line["text"] is not None else "(not summarized yet: zoom it)"
        assert f"{line['id']}+{line['n']}|{shown}" == text


def test_zoom_gives_two_children_then_the_message(served: Served) -> None:
    first = api(served, "api/view")["lines"][0]
    children = api(served, f"api/zoom?id={first['id']}&n={first['n']}")["children"]
    half = first["n"] // 2
    assert [(c["id"], c["n"], c["level"]) for c in children] == [
        (0, half, first["level"] - 1),
        (half, half, first["level"] - 1),
    ]
    message = api(served, "api/zoom?id=5&n=1")["message"]
    assert (message["id"], message["kind"], message["text"]) == (5, "ever", HOSTILE)
    assert message["date"].startswith("20")
    tool = api(served, "api/zoom?id=2&n=1")["message"]
    assert tool["kind"] == "tool" and tool["text"].startswith("shell {")
    assert api(served, "api/zoom?id=1&n=1")["message"]["images"] == [served.image]
    assert api(served, "api/date?id=5")["date"] == message["date"]


def test_bad_requests_get_one_line(served: Served) -> None:
    token = served.server.token
    for path in ("api/zoom?id=1&n=2", "api/zoom?id=0&n=3", "api/zoom?id=60&n=1", "api/date?id=x"):
        status, _, body = request(served, f"/{token}/{path}")
        assert status == 400, path
        error = json.loads(body)["error"]
        assert error and "\n" not in error
    assert request(served, f"/{token}/api/nothing")[0] == 404


def test_images_come_from_the_chats_folder_only(served: Served) -> None:
    token = served.server.token
    status, headers, body = request(served, f"/{token}/api/image?name={served.image}")
    assert status == 200 and headers["Content-Type"] == "image/png"
    assert body.startswith(b"\x89PNG")
    for name in ("../lock", "..%2Fview.json", "x.png", "0" * 64 + ".png"):
        assert request(served, f"/{token}/api/image?name={name}")[0] == 400, name


def test_the_status_says_what_is_still_being_summarized(served: Served) -> None:
    status = api(served, "api/status")
    assert status["messages"] == 60
    assert status["summarizing"] == {"first": 56, "last": 59, "unbuilt": status["unbuilt"]}
    assert status["budget"] == [3000, 1500, 1200, 600]


def test_the_page_follows_a_chat_that_grows(served: Served) -> None:
    assert api(served, "api/view")["t"] == 60
    with Chat.open(served.chat_dir) as chat:  # as the service would, writing
        chat.append("user", "one more message")
    view = api(served, "api/view")
    assert view["t"] == 61
    assert view["lines"][-1]["text"] == "user: one more message"
    assert api(served, "api/zoom?id=60&n=1")["message"]["text"] == "one more message"


def test_the_sawtooth_and_the_usage_come_from_their_own_process(served: Served) -> None:
    assert api(served, "api/sawtooth") == {"ready": False}  # the first ask starts it
    found = served.server.sawtooth.wait(60)
    assert found is not None and found["ready"] and "error" not in found
    assert api(served, "api/sawtooth") == found
    stretches = found["stretches"]
    assert len(stretches) == 60 and stretches[-1][:2] == [59, 59]
    # every node here was built as soon as it could be: the replay ends where the chat is
    status = api(served, "api/status")
    assert (stretches[-1][2], stretches[-1][5]) == (status["view_bytes"], status["cview_bytes"])
    assert found["batches"] >= 1 and 1500 < max(row[4] for row in stretches) <= 3000
    usage = served.server.usage.wait(60)
    assert usage is not None and usage["summary"]["total"]["calls"] == 0


def test_the_command_loads_no_model_sdk() -> None:
    code = (
        "import sys, evertalk.browse.command, evertalk.browse.server, evertalk.browse.export\n"
        "print(sorted(m for m in ('anthropic', 'openai', 'textual') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
