"""The size loop (SPEC §4.4): processing replies, cutting lines, and when to ask again."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evertalk.compactor.grounding import source_of
from evertalk.compactor.line import (
    MAX_REJECTIONS,
    MAX_TRIES,
    Done,
    FollowUp,
    SizeLoop,
    Unusable,
    cut_line,
    process,
)
from evertalk.compactor.tasks import TOO_LONG, sent_back, too_long
from evertalk.memory.text import cut_utf8

MULTIBYTE = ["é", "€", "😀", "字"]  # 2, 3, 4 and 3 bytes


def nbytes(text: str) -> int:
    return len(text.encode("utf-8"))


def line_of(size: int, tag: str = "a") -> str:
    """An ASCII line of exactly `size` bytes, distinct per tag, that `process` leaves alone."""
    words = f"{tag}{size} " + "lorem ipsum dolor, sit amet " * (size // 10 + 2)
    line = words[:size]
    return line[:-1] + "x" if line.endswith(" ") else line


# -- process ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("  user: hi \n", "user: hi"),
        ("```\nuser: hi\n```", "user: hi"),
        ("```text\nuser: hi\n```\n", "user: hi"),
        ("~~~\nuser: hi\n~~~", "user: hi"),
        ("```user: hi```", "user: hi"),
        ("12+4|user: hi", "user: hi"),
        ("40+8| user: hi", "user: hi"),
        ("```\n40+8|user: hi\n```", "user: hi"),
        ("user: a\r\nb\rc\nd", "user: a b c d"),
        ("user: a\n\nb", "user: a  b"),
        ("user: 3+1|x is fine", "user: 3+1|x is fine"),
        ("user: `code` kept", "user: `code` kept"),
        ("", ""),
        ("```\n```", ""),
        ("  \n\t ", ""),
        ("7+1|", ""),
        # a mark of our own follow-ups, copied
        ("user: restore took 40 min[CUT]", "user: restore took 40 min"),
        ("user: restore [CUT] took 40 min", "user: restore took 40 min"),
        ("12+4|user: hi [cut: 1,234 more bytes of this reply are not shown]", "user: hi"),
        ("[CUT]", ""),
    ],
)
def test_process(reply: str, expected: str) -> None:
    assert process(reply) == expected


def test_a_line_copied_from_a_follow_up_loses_its_mark() -> None:
    line = line_of(900)
    shown = too_long(line).split("\n", 1)[1]
    assert process(shown) == cut_utf8(line, 512)
    assert process(sent_back(line)) == cut_utf8(line, 1_024)


@given(st.text())
def test_process_gives_one_stripped_line(reply: str) -> None:
    line = process(reply)
    assert "\n" not in line and "\r" not in line
    assert line == line.strip()


# -- cut_line -----------------------------------------------------------------------------------


def test_cut_line_leaves_a_fitting_line() -> None:
    for size in (1, 300, 512):
        line = line_of(size)
        assert cut_line(line) == line


def test_cut_line_plain_prefix() -> None:
    assert cut_line("a" * 600) == "a" * 512


def test_cut_line_prefers_semicolon_in_last_fifth() -> None:
    # the prefix is 512 bytes; its last fifth starts at byte 409.6, so 410 is in and 409 is out
    assert cut_line("a" * 450 + "; " + "b" * 200) == "a" * 450
    assert cut_line("a" * 410 + "; " + "b" * 200) == "a" * 410
    assert cut_line("a" * 409 + "; " + "b" * 200) == "a" * 409 + "; " + "b" * 101
    assert cut_line("a" * 400 + "; " + "b" * 200) == "a" * 400 + "; " + "b" * 110


@pytest.mark.parametrize("mark", [".", "!", "?"])
def test_cut_line_after_a_sentence_end(mark: str) -> None:
    assert cut_line("a" * 450 + mark + " " + "b" * 200) == "a" * 450 + mark
    assert cut_line("a" * 300 + mark + " " + "b" * 300).endswith("b")  # too early: plain cut
    assert cut_line("a" * 450 + mark + "b" * 200) == "a" * 450 + mark + "b" * 61  # no space


@pytest.mark.parametrize("mark", ["。", "！", "？"])
def test_cut_line_after_a_wide_sentence_end(mark: str) -> None:
    line = "字" * 160 + mark + "字" * 100  # the prefix holds 170 characters, 510 bytes
    assert cut_line(line) == "字" * 160 + mark
    early = "字" * 100 + mark + "字" * 200  # byte 300 is before the last fifth
    assert cut_line(early) == cut_utf8(early)


def test_cut_line_takes_the_last_mark() -> None:
    line = "a" * 420 + ". " + "b" * 30 + "; " + "c" * 200
    assert cut_line(line) == "a" * 420 + ". " + "b" * 30
    line = "a" * 420 + "; " + "b" * 30 + ". " + "c" * 200
    assert cut_line(line) == "a" * 420 + "; " + "b" * 30 + "."


def test_cut_line_mark_at_the_limit() -> None:
    # a mark that starts on the prefix's last byte still counts
    assert cut_line("a" * 511 + ". " + "b" * 10) == "a" * 511 + "."
    assert cut_line("a" * 511 + "; " + "b" * 10) == "a" * 511


def test_cut_line_strips_trailing_spaces() -> None:
    assert cut_line("a" * 500 + " " * 20 + "b" * 100) == "a" * 500
    assert cut_line("a" * 440 + ".  " + "b" * 100) == "a" * 440 + "."


@pytest.mark.parametrize("char", MULTIBYTE)
@pytest.mark.parametrize("ascii_len", range(505, 513))
def test_cut_line_never_splits_a_character(char: str, ascii_len: int) -> None:
    line = "a" * ascii_len + char * 10
    cut = cut_line(line)
    raw = cut.encode()
    assert line.encode().startswith(raw)
    assert len(raw) <= 512 < len(raw) + nbytes(char)


@given(st.text(min_size=1))
def test_cut_line_bounds(line: str) -> None:
    cut = cut_line(line)
    assert cut
    assert 1 <= nbytes(cut) <= 512
    assert line.startswith(cut)
    cut.encode("utf-8")  # whole characters only
    if nbytes(line) > 512:
        assert nbytes(cut) <= nbytes(cut_utf8(line))


# -- the size loop: the examples of SPEC §4.4 ---------------------------------------------------


def run(replies: Sequence[str | None]) -> tuple[SizeLoop, list[FollowUp], Done | Unusable]:
    """Feed replies (None for a thinking-only one) until the loop ends."""
    loop = SizeLoop("Compaction: task")
    follow_ups: list[FollowUp] = []
    for reply in replies:
        step = loop.take(reply or "", thinking_only=reply is None)
        if isinstance(step, FollowUp):
            follow_ups.append(step)
            continue
        assert loop.finished and loop.result == step
        return loop, follow_ups, step
    raise AssertionError("the loop did not end")


def test_400_taken_at_once() -> None:
    line = line_of(400)
    loop, follow_ups, result = run([line])
    assert result == Done(line, trimmed=False)
    assert loop.tries == 1 and not follow_ups


def test_600_then_480() -> None:
    first, second = line_of(600), line_of(480)
    loop, follow_ups, result = run([first, second])
    assert result == Done(second)
    assert loop.tries == 2
    assert follow_ups == [FollowUp(too_long(first), first)]


def test_530_520_525() -> None:
    lines = [line_of(530), line_of(520), line_of(525)]
    loop, follow_ups, result = run([*lines, line_of(100)])
    assert loop.tries == 3
    assert result == Done(cut_line(lines[1]), trimmed=True)
    assert [f.text for f in follow_ups] == [too_long(lines[0]), too_long(lines[1])]


def test_900_900_keeps_the_first() -> None:
    first, second = line_of(900, "p"), line_of(900, "q")
    loop, _, result = run([first, second, line_of(100)])
    assert loop.tries == 2
    assert result == Done(cut_line(first), trimmed=True)
    assert result.line.startswith("p900")


def test_900_then_empty() -> None:
    line = line_of(900)
    loop, _, result = run([line, "  \n"])
    assert loop.tries == 2
    assert result == Done(cut_line(line), trimmed=True)


def test_900_then_thinking_only() -> None:
    line = line_of(900)
    loop, _, result = run([line, None, line_of(100)])
    assert loop.tries == 2
    assert result == Done(cut_line(line), trimmed=True)


def test_900_800_700_650_660() -> None:
    lines = [line_of(size) for size in (900, 800, 700, 650, 660)]
    loop, follow_ups, result = run([*lines, line_of(100)])
    assert loop.tries == 5 and len(follow_ups) == 4
    assert result == Done(cut_line(lines[3]), trimmed=True)
    assert loop.sizes == [900, 800, 700, 650, 660]


def test_five_ever_shorter_tries_end_the_loop() -> None:
    lines = [line_of(size) for size in (900, 800, 700, 650, 600)]
    loop, _, result = run([*lines, line_of(100)])
    assert loop.tries == MAX_TRIES == 5
    assert result == Done(cut_line(lines[4]), trimmed=True)


def test_first_among_equals() -> None:
    lines = [line_of(900, "p"), line_of(700, "q"), line_of(700, "r")]
    loop, _, result = run(lines)
    assert loop.tries == 3
    assert isinstance(result, Done) and result.line.startswith("q700")


@pytest.mark.parametrize("reply", ["", "   ", "```\n```", None])
def test_empty_is_unusable(reply: str | None) -> None:
    loop, _, result = run([reply])
    assert result == Unusable()
    assert loop.tries == 1


def test_processing_counts() -> None:
    # a fenced reply with a copied head whose processed line fits is taken at once
    loop, _, result = run(["```\n12+4|user: hi\nthere\n```"])
    assert result == Done("user: hi there")
    assert loop.tries == 1


def test_an_over_long_reply_goes_back_cut_to_two_lines() -> None:
    long, short = line_of(3_000), line_of(700)
    loop = SizeLoop("Compaction: task")
    step = loop.take(long)
    assert isinstance(step, FollowUp) and step.reply == sent_back(long)
    assert step.reply.startswith(cut_utf8(long, 1_024) + " [CUT: 1,976 more bytes")
    step = loop.take(short)
    assert isinstance(step, FollowUp) and step.reply == short  # two lines' worth go back whole


def test_no_take_after_the_end() -> None:
    loop = SizeLoop("Compaction: task")
    assert loop.first_task == "Compaction: task"
    assert not loop.finished
    loop.take("user: hi")
    with pytest.raises(RuntimeError):
        loop.take("user: hi")


# -- the size loop: properties ------------------------------------------------------------------

straddling = st.builds(
    lambda k, ch, n: "a" * k + ch * n,
    st.integers(0, 700),
    st.sampled_from(MULTIBYTE),
    st.integers(0, 400),
)
reply = st.one_of(
    st.none(),  # thinking-only
    st.just(""),
    st.text(max_size=1_000),
    straddling,
    st.builds(lambda a, b: a + "; " + b, straddling, straddling),
    st.builds(lambda a, b: f"```\n3+1|{a}\n{b}\n```", straddling, st.text(max_size=50)),
)


def reference(lines: list[str]) -> tuple[int, str | None]:
    """SPEC §4.4 written out plainly: (calls made, stored line or None when unusable)."""
    best: str | None = None
    tries = 0
    for line in lines:
        tries += 1
        if not line:
            break
        if nbytes(line) <= 512:
            return tries, line
        if best is not None and nbytes(line) >= nbytes(best):
            break
        best = line
        if tries == 5:
            break
    return tries, None if best is None else cut_line(best)


@given(st.lists(reply, min_size=MAX_TRIES, max_size=MAX_TRIES))
def test_loop_properties(replies: list[str | None]) -> None:
    loop = SizeLoop("Compaction: task")
    result: Done | Unusable | None = None
    for item in replies:
        step = loop.take(item or "", thinking_only=item is None)
        assert loop.tries <= MAX_TRIES
        if isinstance(step, FollowUp):
            assert step.text.startswith(TOO_LONG.split("{")[0])
            continue
        result = step
        break
    assert result is not None, "the loop must end within 5 tries"
    lines = ["" if item is None else process(item) for item in replies]
    tries, expected = reference(lines)
    assert loop.tries == tries
    if expected is None:
        assert result == Unusable()
        assert all(not line for line in lines[:tries])
    else:
        assert isinstance(result, Done)
        assert result.line == expected
        raw = result.line.encode("utf-8")
        assert 1 <= len(raw) <= 512
        assert raw.decode("utf-8") == result.line
        # the stored line is a prefix of one of the tries, cut between whole characters
        assert any(line.startswith(result.line) for line in lines[:tries])


# -- grounding (SPEC §4.8) ----------------------------------------------------------------------

INPUT = (
    "user: the nightly rsync of ~/notes to the NAS at 192.168.1.20 failed twice this week with "
    "error 23; the backup log is /var/log/backup.log and the job runs from cron at 02:00. " * 3
)
HONEST = "user: nightly rsync of ~/notes to the NAS (192.168.1.20) failed twice, error 23"
INVENTED = "user: the flight LH 4521 was booked and the request approved."


def grounded_loop() -> SizeLoop:
    return SizeLoop("Compaction: task", source_of(INPUT))


def test_a_grounded_line_is_taken() -> None:
    loop = grounded_loop()
    assert loop.take(HONEST) == Done(HONEST)
    assert loop.rejected is None and loop.rejections == []


def test_an_invented_line_gets_a_follow_up_naming_what_is_missing() -> None:
    loop = grounded_loop()
    step = loop.take(INVENTED)
    assert isinstance(step, FollowUp) and step.reply == INVENTED
    assert step.text.startswith("Not true to the input: `4521` does not occur in it;")
    assert "few of its words come from it" in step.text
    assert loop.rejected == "not in its input: 4521; only 0 of its 4 content words are in its input"
    assert loop.take(HONEST) == Done(HONEST)
    assert loop.rejected is None and loop.tries == 2


def test_two_invented_lines_make_the_reply_unusable() -> None:
    loop = grounded_loop()
    assert isinstance(loop.take(INVENTED), FollowUp)
    result = loop.take(INVENTED)
    assert MAX_REJECTIONS == 2 and loop.tries == 2
    assert result == Unusable(loop.rejections[-1]) and loop.result == result


def test_an_invented_line_is_never_kept_but_an_over_long_grounded_one_is() -> None:
    over_long = (HONEST + "; ") * 8  # grounded, over 512 bytes
    loop = grounded_loop()
    step = loop.take(over_long)
    assert isinstance(step, FollowUp) and step.text.startswith(TOO_LONG.split("{")[0])
    assert isinstance(loop.take(INVENTED), FollowUp)
    result = loop.take(INVENTED + " " + INVENTED)
    assert result == Done(cut_line(process(over_long)), trimmed=True)


def test_an_empty_reply_after_a_rejection_is_unusable_for_it() -> None:
    loop = grounded_loop()
    loop.take(INVENTED)
    result = loop.take("")
    assert isinstance(result, Unusable) and result.rejected == loop.rejections[0]


def test_an_over_long_invented_line_is_judged_before_its_size() -> None:
    loop = grounded_loop()
    step = loop.take((INVENTED + " ") * 20)
    assert isinstance(step, FollowUp) and step.text.startswith("Not true to the input")
    assert "[CUT: " in step.reply  # sent back cut all the same


@given(st.lists(reply, min_size=MAX_TRIES, max_size=MAX_TRIES))
def test_a_loop_of_lines_copied_from_its_input_is_the_plain_size_loop(
    replies: list[str | None],
) -> None:
    """Grounding changes nothing for a line that is its input's own words: with the input made
    of the replies themselves, the loop runs as without a source."""
    source = source_of(*(item or "" for item in replies))
    plain, checked = SizeLoop("Compaction: task"), SizeLoop("Compaction: task", source)
    for item in replies:
        expected = plain.take(item or "", thinking_only=item is None)
        assert checked.take(item or "", thinking_only=item is None) == expected
        assert checked.rejected is None
        if plain.finished:
            break
