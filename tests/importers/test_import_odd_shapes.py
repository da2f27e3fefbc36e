"""Records of any shape, in the frame of each format: a reader never stops on one, and every
message it gives is one the log can take."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evertalk.importers import Reading, read_paths

JSON: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
TIMES = st.sampled_from(["2025-10-02T08:14:03.098Z", "2024-04-01T09:00:00+02:00", "soon", 3, None])


def fields(names: list[str], extra: dict[str, st.SearchStrategy[Any]] | None = None) -> Any:
    """Objects with some of these keys, each holding anything (or what `extra` says)."""
    chosen = {name: (extra or {}).get(name, JSON) for name in names}
    return st.fixed_dictionaries({}, optional=chosen)


BLOCKS = st.lists(
    fields(
        ["type", "text", "id", "name", "input", "tool_use_id", "content", "source", "is_error"],
        {
            "type": st.sampled_from(
                ["text", "thinking", "tool_use", "tool_result", "image", "server_tool_use", "x"]
            ),
            "source": fields(["type", "media_type", "data"], {"type": st.just("base64")}),
        },
    )
    | st.text(max_size=5),
    max_size=4,
)
CLAUDE = fields(
    ["type", "uuid", "parentUuid", "timestamp", "message", "isSidechain", "isMeta", "summary"],
    {
        "type": st.sampled_from(["user", "assistant", "summary", "system", "progress"]),
        "uuid": st.sampled_from(["u1", "u2", "u3", None]),
        "parentUuid": st.sampled_from(["u1", "u2", "u3", None]),
        "timestamp": TIMES,
        "message": fields(["role", "content", "model"], {"content": BLOCKS | st.text() | JSON}),
    },
).map(lambda record: {"sessionId": "s", **record})
CODEX = st.fixed_dictionaries(
    {
        "timestamp": TIMES,
        "type": st.sampled_from(["session_meta", "response_item", "event_msg", "compacted"]),
        "payload": fields(
            [
                "type",
                "role",
                "content",
                "name",
                "arguments",
                "input",
                "call_id",
                "output",
                "action",
            ],
            {
                "type": st.sampled_from(
                    [
                        "message",
                        "function_call",
                        "function_call_output",
                        "custom_tool_call",
                        "local_shell_call",
                        "web_search_call",
                        "reasoning",
                    ]
                ),
                "role": st.sampled_from(["user", "assistant", "developer"]),
                "content": st.lists(fields(["type", "text", "image_url"]), max_size=3) | JSON,
                "output": st.text(max_size=10) | JSON,
            },
        ),
    }
)
MESSAGE = fields(
    ["author", "content", "create_time", "recipient", "metadata"],
    {
        "author": fields(
            ["role", "name"], {"role": st.sampled_from(["user", "assistant", "tool"])}
        ),
        "content": fields(
            ["content_type", "parts", "text"],
            {"content_type": st.sampled_from(["text", "multimodal_text", "code", "thoughts"])},
        ),
        "create_time": st.floats(0, 2e9) | st.none(),
    },
)
CHATGPT = st.lists(
    fields(
        ["title", "create_time", "mapping", "current_node", "id"],
        {
            "mapping": st.dictionaries(
                st.sampled_from(["a", "b", "c"]),
                fields(
                    ["message", "parent", "children"],
                    {
                        "message": MESSAGE,
                        "parent": st.sampled_from(["a", "b", "c", None]),
                        "children": st.lists(st.sampled_from(["a", "b", "c"]), max_size=2),
                    },
                ),
            ),
            "current_node": st.sampled_from(["a", "b", "c", "z"]),
        },
    ),
    max_size=3,
)
PLAIN = fields(
    ["role", "text", "time", "id"],
    {"role": st.sampled_from(["user", "assistant", "tool", "note", "x"]), "time": TIMES},
)


def check(reading: Reading) -> None:
    assert not [p for p in reading.problems if p.why.startswith("not read:")]
    for message in reading.messages():
        assert message.kind in ("user", "ever", "tool", "echo", "note")
        assert message.text.strip()
        assert message.time.tzinfo is not None
        for media_type, data in message.images:
            assert media_type.startswith("image/") and data


SETTINGS = settings(suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("name", ["claude-code", "codex", "plain"])
def test_any_records_in_a_json_lines_format_are_read_without_a_stop(
    tmp_path_factory: pytest.TempPathFactory, name: str
) -> None:
    strategy = {"claude-code": CLAUDE, "codex": CODEX, "plain": PLAIN}[name]
    first = {
        "claude-code": {"type": "summary", "summary": "t", "leafUuid": "u1"},
        "codex": {"timestamp": "2025-01-01T00:00:00Z", "type": "session_meta", "payload": {}},
        "plain": {"role": "note", "text": "start", "time": "2025-01-01T00:00:00Z"},
    }[name]

    path = tmp_path_factory.mktemp(name) / f"{name}.jsonl"

    @SETTINGS
    @given(records=st.lists(strategy, max_size=8))
    def run(records: list[dict[str, Any]]) -> None:
        lines = [json.dumps(first), *map(json.dumps, records)]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        check(read_paths([path]))

    run()


@SETTINGS
@given(export=CHATGPT)
def test_any_conversations_in_an_export_are_read_without_a_stop(
    tmp_path_factory: pytest.TempPathFactory, export: list[dict[str, Any]]
) -> None:
    path = tmp_path_factory.getbasetemp() / "odd-chatgpt" / "conversations.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(export), encoding="utf-8")
    check(read_paths([path]))
