"""`evertalk bench recall --dataset FILE`: a LongMemEval data file, each question in a fresh
chat with its dated sessions imported at their dates, scored by containment (SPEC §14). A tiny
file in that format stands in for the real one, which the user downloads."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from recall_fakes import script
from test_recall_run import OWN, configure

from evertalk.recall import dataset
from evertalk.recall.client import BenchError
from evertalk.recall.report import JUDGE_NOTE
from evertalk.recall.runner import Options, new_report, run
from fakes import AnthropicFake, serve

ITEMS = [
    {
        "question_id": "q-fern",
        "question_type": "single-session-user",
        "question": "Where did I end up putting the Ostravel fern?",
        "answer": "balcony",
        "question_date": "2023/06/01 (Thu) 10:00",
        "haystack_session_ids": ["s1", "s2"],
        "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/27 (Sat) 18:05"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "Can you suggest a soup for a cold evening?"},
                {"role": "assistant", "content": "A leek and potato soup is warm and easy."},
            ],
            [
                {
                    "role": "user",
                    "content": "I moved the Ostravel fern to the balcony, it likes the light.",
                    "has_answer": True,
                },
                {"role": "assistant", "content": "Good spot; water it when the soil is dry."},
            ],
        ],
    },
    {
        "question_id": "q-bike_abs",
        "question_type": "knowledge-update",
        "question": "How many gears does my Quirrel bike have now?",
        "answer": 11,
        "haystack_dates": ["2023/04/02 (Sun) 09:00"],
        "haystack_sessions": [
            [{"role": "user", "content": "My Quirrel bike got a new cassette: 12 gears now."}]
        ],
    },
]


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(OWN) and name != "EVERTALK_SERVICE_IDLE":
            monkeypatch.delenv(name)


def test_each_item_is_a_fresh_chat_imported_at_its_dates(tmp_path: Path) -> None:
    path = tmp_path / "longmemeval_tiny.json"
    path.write_text(json.dumps(ITEMS))
    cases = dataset.load(path)
    assert [len(case.questions) for case in cases] == [1, 1]
    assert cases[0].questions[0].age == 2  # the evidence is the chat's third message of four
    assert cases[1].questions[0].expected == "11"
    fake = AnthropicFake(script(["Ostravel", "Quirrel"], 1 << 30))
    user = tmp_path / "user-home"
    with serve(fake.app) as url:
        configure(user, url)
        options = Options(user_home=user, keep=True, scratch_root=tmp_path)
        report = new_report(options, None, str(path), 2)
        report.notes.append(JUDGE_NOTE)
        root = run(cases, options, report, lambda line: None)
    first, second = root / "case-0001", root / "case-0002"
    assert (first / "chat" / "main" / "2023-05-20.jsonl").exists()
    assert (first / "chat" / "main" / "2023-05-27.jsonl").exists()
    assert (second / "chat" / "main" / "2023-04-02.jsonl").exists()
    assert "Ostravel" not in (second / "chat" / "main" / "2023-04-02.jsonl").read_text()
    outcomes = [a.outcome for a in report.evertalk.answers]
    assert outcomes == ["right", "missed"]  # "12 gears" does not contain 11
    assert report.messages == 5
    table = "\n".join(report.table())
    assert "stricter than the LLM judge" in table
    assert report.to_json()["dataset"] == str(path)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("not json", "is not a JSON file"),
        ("{}", "must hold a JSON list"),
        ('[{"question": "q"}]', "item 1: needs question, answer and haystack_sessions"),
        (
            '[{"question": "q", "answer": "a", "haystack_sessions": [[]], '
            '"haystack_dates": ["someday"]}]',
            "cannot read the date",
        ),
    ],
)
def test_a_file_that_is_not_one_is_one_clear_line(tmp_path: Path, content: str, said: str) -> None:
    path = tmp_path / "data.json"
    path.write_text(content)
    with pytest.raises(BenchError, match=said):
        dataset.load(path)
