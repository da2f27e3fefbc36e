"""Codex CLI rollouts, the wrapped shape of autumn 2025 and the older unwrapped one."""

from __future__ import annotations

import json
from pathlib import Path

from importer_helpers import CODEX_NEW, CODEX_OLD, CODEX_OLD_MCP, PNG_1x1, keyed, only, pairs

from evertalk.importers import read_paths

NEW = "0199a3c2-7d1e-7b40-9c55-3e8f1a2b4c6d"
OLD = "5973b6c0-94b8-487b-a530-2aeb6098ae0e"


def test_a_wrapped_rollout_becomes_its_conversation() -> None:
    reading = read_paths([CODEX_NEW])
    conversation = only(reading)
    assert (conversation.source, conversation.id) == ("codex", NEW)
    assert pairs(conversation) == [
        ("note", f"Imported from Codex: session {NEW} in /home/ada/src/shop"),
        ("user", "Why is the cart total off by a cent? Voilà la capture :"),
        (
            "tool",
            'shell {"command":["bash","-lc","rg -n \\"round\\\\(\\" shop"],'
            '"workdir":"/home/ada/src/shop"}',
        ),
        ("echo", "shell: shop/pricing.py:42:    return round(total, 2)\n[exit status 0]"),
        (
            "tool",
            'apply_patch {"input":"*** Begin Patch\\n*** Update File: shop/pricing.py\\n@@\\n-    '
            "return round(total, 2)\\n+    return total.quantize(CENT, rounding=ROUND_HALF_UP)\\n"
            '*** End Patch\\n"}',
        ),
        (
            "echo",
            "apply_patch: Success. Updated the following files:\nM shop/pricing.py\n"
            "[exit status 0]",
        ),
        (
            "tool",
            'shell {"command":["bash","-lc","make test"],"workdir":"/home/ada/src/shop",'
            '"timeout_ms":120000}',
        ),
        (
            "echo",
            "shell: Exit code: 0\nWall time: 5.3 seconds\nOutput:\n"
            "........                                                                 [100%]\n"
            "8 passed in 0.41s\n",
        ),
        (
            "ever",
            "The total used `round()`, which rounds half to even: 0.125 → 0.12. It now uses "
            "`quantize(..., ROUND_HALF_UP)`; `make test` passes.",
        ),
        ("user", "Is ROUND_HALF_UP what shops in Germany use?"),
        (
            "tool",
            'web_search {"type":"search","query":"Rundung kaufmännisch ROUND_HALF_UP Preise '
            'Deutschland"}',
        ),
        ("ever", "Yes: „kaufmännisches Runden“ is half up."),
    ]
    assert reading.problems == []


def test_injected_context_reasoning_and_events_are_left_out_and_counted() -> None:
    reading = read_paths([CODEX_NEW])
    texts = "\n".join(m.text for m in only(reading).messages)
    assert "environment_context" not in texts
    assert "AGENTS.md" not in texts
    assert "Inspecting pricing code" not in texts  # reasoning, twice: item and event
    assert "<image" not in texts
    assert reading.skipped["context the agent injected"] == 2
    assert reading.skipped["thoughts (never imported)"] == 1
    assert reading.skipped["Codex event_msg lines"] == 6
    assert reading.skipped["Codex turn_context lines"] == 1
    assert reading.skipped["Codex compacted lines"] == 1
    assert reading.skipped["Codex ghost_snapshot items"] == 1
    assert reading.skipped["empty messages"] == 1


def test_keys_times_images_and_references() -> None:
    messages = keyed(only(read_paths([CODEX_NEW])))
    question = messages[f"codex:{NEW}:4"]
    assert question.images == (("image/png", PNG_1x1),)
    assert question.time.isoformat() == "2025-10-03T14:03:02.577000+00:00"
    assert question.source == f"codex {CODEX_NEW}:4"


def test_an_old_unwrapped_rollout_takes_the_sessions_time_and_skips_state_lines() -> None:
    reading = read_paths([CODEX_OLD])
    conversation = only(reading)
    assert conversation.id == OLD
    assert pairs(conversation)[1:] == [
        ("user", "list the files here"),
        ("tool", 'shell {"command":["ls"]}'),
        ("echo", "shell: README.md\nshop\ntests\n[exit status 0]"),
        ("ever", "Three entries: README.md, shop/ and tests/."),
        ("user", "show me the README"),
        (
            "tool",
            'local_shell {"type":"exec","command":["cat","README.md"],"timeout_ms":10000,'
            '"working_directory":null,"env":null,"user":null}',
        ),
        ("echo", "local_shell: cat: README.md: Permission denied\n[exit status 1]"),
    ]
    assert {m.time.isoformat() for m in conversation.messages} == {
        "2025-05-07T17:24:21.123000+00:00"
    }
    assert reading.skipped["Codex state lines"] == 2
    assert reading.skipped["thoughts (never imported)"] == 1
    # the torn line 9 is named, and the lines after it are read
    assert [(p.file, p.line) for p in reading.problems] == [(str(CODEX_OLD), 9)]
    assert f"codex:{OLD}:12" in keyed(conversation)


def test_structured_outputs_with_images_and_a_call_of_unknown_name(tmp_path: Path) -> None:
    rollout = tmp_path / "rollout-2025-11-01T09-00-00-0199b000-0000-7000-8000-000000000001.jsonl"
    lines = [
        {
            "timestamp": "2025-11-01T09:00:00.000Z",
            "type": "session_meta",
            "payload": {"id": "s-1", "timestamp": "2025-11-01T09:00:00.000Z", "cwd": "/w"},
        },
        {
            "timestamp": "2025-11-01T09:00:01.000Z",
            "type": "response_item",
            "payload": {
                "type": "function_call",
                "name": "view_image",
                "arguments": '{"path":"/w/shot.png"}',
                "call_id": "call_1",
            },
        },
        {
            "timestamp": "2025-11-01T09:00:02.000Z",
            "type": "response_item",
            "payload": {
                "type": "function_call_output",
                "call_id": "call_1",
                "output": [
                    {"type": "input_text", "text": "the screenshot:"},
                    {"type": "input_image", "image_url": f"data:image/png;base64,{PNG_1x1}"},
                ],
            },
        },
        {
            "timestamp": "2025-11-01T09:00:03.000Z",
            "type": "response_item",
            "payload": {"type": "function_call_output", "call_id": "call_lost", "output": ""},
        },
        {
            "timestamp": "2025-11-01T09:00:04.000Z",
            "type": "response_item",
            "payload": {"type": "message", "role": "developer", "content": []},
        },
        {
            "timestamp": "2025-11-01T09:00:05.000Z",
            "type": "response_item",
            "payload": {"type": "a_type_from_the_future", "data": 1},
        },
    ]
    rollout.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    reading = read_paths([rollout])
    conversation = only(reading)
    assert pairs(conversation)[1:] == [
        ("tool", 'view_image {"path":"/w/shot.png"}'),
        ("echo", "view_image: the screenshot:"),
        ("echo", "tool: (no output)"),
    ]
    assert conversation.messages[2].images == (("image/png", PNG_1x1),)
    assert reading.skipped["system and developer messages"] == 1
    assert reading.skipped["Codex a_type_from_the_future items"] == 1
    assert reading.problems == []


def test_mcp_outputs_of_an_old_rollout_are_their_text_not_escaped_json() -> None:
    conversation = only(read_paths([CODEX_OLD_MCP]))
    assert pairs(conversation)[1:] == [
        ("user", "what does issue ENG-42 say?"),
        ("tool", 'linear__get_issue {"id":"ENG-42"}'),
        (
            "echo",
            "linear__get_issue: ENG-42: Checkout rounds totals down\nStatus: In Progress\n"
            "Assignee: ada",
        ),
        ("tool", 'linear__list_comments {"issue":"ENG-42"}'),
        (
            "echo",
            "linear__list_comments: bo: seen on orders over $100\nada: rounding happens before tax",
        ),
        (
            "ever",
            "ENG-42 is about checkout rounding totals down; it is in progress, and the comments "
            "say it happens before tax on orders over $100.",
        ),
    ]
