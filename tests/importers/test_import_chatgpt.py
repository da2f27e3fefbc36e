"""A ChatGPT export: its folder, its zip, its branches, its images, and exports it cannot read."""

from __future__ import annotations

import base64
import json
import zipfile
from pathlib import Path

import pytest
from importer_helpers import (
    CHATGPT_EXPORT,
    CHATGPT_SEARCH,
    PNG_1x1,
    copy_tree,
    keyed,
    pairs,
    zip_export,
)

from evertalk.importers import Conversation, Reading, read_paths

TRIP = "66ab12cd-0e1f-8002-9a3b-4c5d6e7f8091"
PLOT = "66ab5e6f-7a8b-8003-9c0d-1e2f3a4b5c6d"
GIF_1x1 = "R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7"


def node(n: int) -> str:
    return f"aaa2{n:04d}-1d2e-4f3a-8b4c-5d6e7f8a9b0c"


def plot_node(n: int) -> str:
    return f"bbb3{n:04d}-2e3f-4a5b-8c6d-7e8f9a0b1c2d"


def conversation(reading: Reading, conversation_id: str) -> Conversation:
    return next(c for c in reading.conversations if c.id == conversation_id)


def test_the_branch_the_user_last_saw_is_read_and_the_others_are_counted() -> None:
    reading = read_paths([CHATGPT_EXPORT / "conversations.json"])
    trip = conversation(reading, TRIP)
    assert trip.title == "Trip to Kyōto"
    assert pairs(trip) == [
        ("note", "Imported from ChatGPT: conversation “Trip to Kyōto”"),
        ("user", "Plan three days in Kyōto in April 🌸"),
        (
            "ever",
            "Here is a calm plan:\n\n**Day 1** — Fushimi Inari early, then Tōfuku-ji.\n"
            "**Day 2** — Arashiyama.\n**Day 3** — Higashiyama and Gion.",
        ),
        (
            "user",
            "Is this temple worth it? Also the PDF has my bookings.\n[attached: bookings.pdf]",
        ),
        ("ever", "Yes — that is Kinkaku-ji, worth it early in the morning."),
        ("user", "And vegetarian food? Shōjin ryōri?"),
        ("ever", "Shōjin ryōri at Shigetsu in Tenryū-ji is a classic."),
    ]
    # the first reply (regenerated) and the first question with its answer (edited)
    assert reading.skipped["messages on other branches (edits, regenerations)"] == 3


def test_hidden_and_system_messages_and_thoughts_are_left_out() -> None:
    reading = read_paths([CHATGPT_EXPORT / "conversations.json"])
    texts = "\n".join(m.text for c in reading.conversations for m in c.messages)
    assert "Preferred name: Ada" not in texts  # custom instructions
    assert "golden pavilion" not in texts  # thoughts
    assert "Thought for 9 seconds" not in texts
    assert "DALL·E displayed 1 images" not in texts  # hidden from the conversation
    assert reading.skipped["messages hidden from the conversation"] == 3
    assert reading.skipped["thoughts (never imported)"] == 2


def test_times_are_aware_utc_and_a_missing_one_takes_the_time_before_it() -> None:
    trip = keyed(conversation(read_paths([CHATGPT_EXPORT / "conversations.json"]), TRIP))
    first = trip[f"chatgpt:{TRIP}:{node(3)}"]
    assert first.time.isoformat() == "2024-04-01T09:00:12.500000+00:00"
    last = trip[f"chatgpt:{TRIP}:{node(13)}"]  # its create_time is null
    assert last.time == trip[f"chatgpt:{TRIP}:{node(11)}"].time


def test_images_found_in_the_export_are_kept_and_missing_ones_said() -> None:
    reading = read_paths([CHATGPT_EXPORT])
    trip = keyed(conversation(reading, TRIP))
    assert trip[f"chatgpt:{TRIP}:{node(6)}"].images == (("image/png", PNG_1x1),)
    plot = keyed(conversation(reading, PLOT))
    chart = plot[f"chatgpt:{PLOT}:{plot_node(3)}"]
    # a `.dat` file of the export, typed by its bytes
    assert (chart.kind, chart.text) == ("echo", "python: [image]")
    assert chart.images == (("image/gif", GIF_1x1),)
    missing = plot[f"chatgpt:{PLOT}:{plot_node(8)}"]
    assert missing.text == "dalle.text2im: [image not in the export]"
    assert missing.images == ()
    assert reading.skipped["images not in the export"] == 1


def test_tool_calls_and_results_are_tool_and_echo_messages() -> None:
    plot = conversation(read_paths([CHATGPT_EXPORT]), PLOT)
    assert pairs(plot)[1:] == [
        ("user", "Plot these monthly sales: 3, 5, 8, 13"),
        (
            "tool",
            'python {"code":"import matplotlib.pyplot as plt\\nplt.plot([3, 5, 8, 13])\\n'
            "plt.title('Sales')\\nplt.show()\"}",
        ),
        ("echo", "python: [image]"),
        ("echo", "python: <<ImageDisplayed>>"),
        ("ever", "Here is the plot: sales grow like Fibonacci."),
        ("user", "Draw a cat holding that chart"),
        (
            "tool",
            'dalle.text2im {"prompt":"A cat proudly holding a line chart of rising sales",'
            '"size":"1024x1024"}',
        ),
        ("echo", "dalle.text2im: [image not in the export]"),
        ("user", "what was the best month"),  # a voice message's transcript
        ("ever", "April, with 13."),
    ]


def test_the_zip_reads_as_the_folder_does(tmp_path: Path) -> None:
    folder = read_paths([CHATGPT_EXPORT])
    archive = zip_export(CHATGPT_EXPORT, tmp_path / "0c1d2e3f-2024-04-03-08-11-52.zip", "export/")
    zipped = read_paths([archive])
    assert zipped.problems == []
    assert [(m.key, m.text, m.images, m.time) for m in zipped.messages()] == [
        (m.key, m.text, m.images, m.time) for m in folder.messages()
    ]
    assert zipped.files == [f"{archive}!export/conversations.json"]


CLAUDE_AI = [  # the export of another service, under the same file name
    {
        "uuid": "0f1e2d3c-4b5a-4697-8877-66554433aa10",
        "name": "Trip plans",
        "created_at": "2025-03-01T10:00:00.000000Z",
        "chat_messages": [{"uuid": "m1", "text": "Hello", "sender": "human"}],
    }
]


@pytest.mark.parametrize(
    "document",
    [{"schema_version": 2, "conversations": []}, CLAUDE_AI],
    ids=["an object", "another service's list"],
)
@pytest.mark.parametrize("zipped", [False, True], ids=["file", "zip"])
def test_a_conversations_file_of_another_shape_is_not_a_format_read(
    tmp_path: Path, document: object, zipped: bool
) -> None:
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps(document, indent=2), encoding="utf-8")
    given = export
    if zipped:
        given = tmp_path / "export.zip"
        with zipfile.ZipFile(given, "w") as archive:
            archive.write(export, "conversations.json")
    reading = read_paths([given])
    assert reading.conversations == []
    (problem,) = reading.problems
    assert problem.file == (f"{given}!conversations.json" if zipped else str(export))
    assert problem.why.startswith("not a format this importer reads")
    assert "newer" not in problem.why


def test_a_conversation_of_an_unknown_shape_is_a_problem_and_the_others_are_read(
    tmp_path: Path,
) -> None:
    folder = copy_tree(CHATGPT_EXPORT, tmp_path / "export")
    export = json.loads((folder / "conversations.json").read_text(encoding="utf-8"))
    export.insert(1, {"id": "c-new", "title": "From the future", "messages": []})
    (folder / "conversations.json").write_text(json.dumps(export), encoding="utf-8")
    reading = read_paths([folder])
    assert {c.id for c in reading.conversations} == {TRIP, PLOT}
    (problem,) = reading.problems
    assert problem.record == "conversation c-new"
    assert "mapping" in problem.why


def test_damaged_json_names_the_line(tmp_path: Path) -> None:
    export = tmp_path / "conversations.json"
    text = (CHATGPT_EXPORT / "conversations.json").read_text(encoding="utf-8")
    export.write_text(text[: len(text) // 2].replace(", ", ",\n"), encoding="utf-8")
    reading = read_paths([export])
    (problem,) = reading.problems
    assert problem.line is not None and problem.line > 1
    assert problem.why.startswith("not valid JSON")


def test_without_current_node_the_newest_leaf_is_followed(tmp_path: Path) -> None:
    export = json.loads((CHATGPT_EXPORT / "conversations.json").read_text(encoding="utf-8"))
    trip = next(c for c in export if c["id"] == TRIP)
    del trip["current_node"]
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([trip]), encoding="utf-8")
    texts = [m.text for m in read_paths([path]).conversations[0].messages]
    # the edited question is the newer leaf by time
    assert texts[-2:] == [
        "And vegetarian food? Shōjin ryōri?",
        "Shōjin ryōri at Shigetsu in Tenryū-ji is a classic.",
    ]


def test_an_image_too_big_to_send_is_left_out(tmp_path: Path) -> None:
    folder = copy_tree(CHATGPT_EXPORT, tmp_path / "export")
    big = base64.b64decode(PNG_1x1) + b"\0" * 5_100_000
    (folder / "file-8cWq1Lm2Zk9Yx4Tb-IMG_2041.png").write_bytes(big)
    reading = read_paths([folder])
    question = keyed(conversation(reading, TRIP))[f"chatgpt:{TRIP}:{node(6)}"]
    assert question.images == ()
    assert question.text.startswith("[image left out]\nIs this temple worth it?")
    assert reading.skipped["images over 5 MB"] == 1


SEARCH = "683e6a00-1b2c-8004-9d3e-4f5a6b7c8d9e"
BROWSING = "e5f6a7b8-0c1d-4e2f-9a3b-4c5d6e7f8a9b"
WEATHER = "https://weather.com/weather/tenday/l/Kyoto+Japan"
JMA = "https://www.jma.go.jp/bosai/forecast/#area_code=260000"


def test_search_results_are_imported_and_citations_become_their_sources() -> None:
    reading = read_paths([CHATGPT_SEARCH])
    assert reading.problems == []
    search = pairs(conversation(reading, SEARCH))
    assert search[1:] == [
        ("user", "Will it rain in Kyoto this weekend?"),
        (
            "tool",
            'web.run {"search_query":[{"q":"Kyoto weather this weekend"}],'
            '"response_length":"short"}',
        ),
        (
            "echo",
            f"web.run: Kyoto, Japan 10-Day Weather Forecast {WEATHER}\n"
            "Saturday: rain, high 21°C. Sunday: clearing, high 24°C.\n\n"
            f"Kyoto Prefecture forecast {JMA}\n"
            "Rain from Saturday morning, 80% chance.",
        ),
        (
            "ever",
            f"Yes: rain is likely on Saturday ([Kyoto Prefecture forecast]({JMA})), clearing on "
            f"Sunday ([weather.com]({WEATHER})). Take an umbrella to Kiyomizu-dera.",
        ),
        ("user", "Thanks!"),
    ]
    assert not any(mark in text for _, text in search for mark in "\ue200\ue201\ue202")
    browsing = pairs(conversation(reading, BROWSING))
    assert browsing[3] == (
        "echo",
        "browser: Python Release Python 3.12.0 "
        "https://www.python.org/downloads/release/python-3120/\n"
        "Python 3.12.0 is the newest major release, out since 2 October 2023.",
    )
