"""The generated chat of the recall benchmark (SPEC §14): the same seed writes the same chat and
questions byte for byte, another seed another; the facts are planted where the questions say,
of every kind, at ages from a few messages to the whole chat."""

from __future__ import annotations

import pytest

from evertalk.memory.text import split_text
from evertalk.recall.generator import generate
from evertalk.recall.scoring import bucket, score
from evertalk.recall.vocab import KINDS


def test_same_seed_same_chat_and_questions_byte_for_byte() -> None:
    first, again = generate(300, 16, seed=5), generate(300, 16, seed=5)
    assert first.chat_jsonl().encode() == again.chat_jsonl().encode()
    assert first.questions_jsonl().encode() == again.questions_jsonl().encode()


def test_another_seed_another_chat() -> None:
    first, other = generate(300, 16, seed=5), generate(300, 16, seed=6)
    assert first.chat_jsonl() != other.chat_jsonl()
    assert first.questions_jsonl() != other.questions_jsonl()


def test_the_chat_has_n_log_messages_with_long_pastes_over_a_page() -> None:
    chat = generate(400, 16, seed=2)
    assert chat.size == 400
    next_id = 0
    for message in chat.messages:
        assert message.id == next_id
        assert len(split_text(message.text)) == message.pages
        next_id += message.pages
    assert any(message.pages == 2 for message in chat.messages)
    assert {m.kind for m in chat.messages} == {"user", "ever", "tool", "echo"}


def test_every_fact_is_where_its_question_says_and_named_nowhere_else() -> None:
    chat = generate(400, 16, seed=3)
    assert {q.kind for q in chat.questions} == set(KINDS)
    pages = {m.id + k: (m, k) for m in chat.messages for k in range(m.pages)}
    for question in chat.questions:
        assert question.message is not None
        message, page = pages[question.message]
        text = split_text(message.text)[page]
        assert question.expected in text
        assert question.topic in question.text
        assert question.expected not in question.text  # the question does not give it away
        named = [m.id for m in chat.messages if question.topic.lower() in m.text.lower()]
        assert named[-1] == message.id
        if question.kind == "correction":
            assert (
                len(named) == 2
                and question.wrong[0]
                in chat.messages[[m.id for m in chat.messages].index(named[0])].text
            )
        if question.kind == "second_page":
            assert page == 1
        if question.kind == "tool_output":
            assert message.kind == "echo"


def test_ages_spread_from_a_few_messages_to_the_whole_chat() -> None:
    chat = generate(2_000, 40, seed=1)
    ages = sorted(q.age for q in chat.questions if q.age is not None)
    assert ages[0] <= 8 and ages[-1] >= 1_000
    assert len({bucket(age) for age in ages}) >= 5


def test_too_few_messages_for_the_facts_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="at least 6 per fact"):
        generate(20, 8, seed=1)


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        ("It topped out at 48,213 a minute.", "right"),
        ("48213", "right"),
        ("ops 4821b", "right"),
        ("ops 4812b", "missed"),
        ("we moved it to Oregon", "stale"),
        ("Frankfurt, not Oregon any more", "stale"),
        ("I do not know", "missed"),
    ],
)
def test_scoring_ignores_case_and_separators_and_an_older_value_is_wrong(
    answer: str, outcome: str
) -> None:
    expected = "OPS-4821B" if "ops" in answer else "48,213"
    if "regon" in answer:
        expected = "Frankfurt"
    assert score(answer, expected, ("oregon",)) == outcome
