"""Grounded summaries (SPEC §4.8): honest lines of real text pass, invented facts do not.

The inputs are messages as a chat holds them (`kind: text`) and merges' two lines; the honest
lines are written as a careful summarizer would, close copies and free paraphrases alike, some
in another language than their input; the invented ones are what a weak model writes instead.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evertalk.compactor.grounding import (
    MIN_SHARED,
    check,
    facts,
    quotes,
    source_of,
    squash,
)
from evertalk.config import MIN_SHARED_WORDS

TRIP = """user: I'm flying to Lisbon next Thursday, 14 March, on TP 1357 from Frankfurt, leaving at
07:40 from terminal 1. My booking reference is QX7RTA and the seat is 23F. Could you put together a
packing list for four days, remind me that the hotel (Casa do Rio, Rua das Flores 12) only does
check-in after 15:00, and look up whether I need a power adapter? Also, I must cancel the gym
session on Friday."""

NGINX = """ever: The 502s come from nginx timing out on the upstream: in /var/log/nginx/error.log
there are "upstream prematurely closed connection while reading response header from upstream"
entries every few minutes, always for /api/export. The gunicorn workers are killed after 30 seconds
(the default --timeout), and the export takes 45-60 s for large accounts. I suggest raising
gunicorn's timeout to 120 and proxy_read_timeout in /etc/nginx/sites-enabled/app.conf to the same
value, or better, moving the export to a background job. Shall I make the change?"""

PYTEST = """echo: shell: F.....
=================================== FAILURES ===================================
_______________________ test_rotate_keeps_seven_copies ________________________
    def test_rotate_keeps_seven_copies(tmp_path):
        for day in range(10):
            rotate(tmp_path / "notes.log", keep=7)
>       assert len(list(tmp_path.glob("notes.log.*"))) == 7
E       AssertionError: assert 8 == 7
tests/test_rotate.py:14: AssertionError
1 failed, 5 passed in 0.42s"""

GERMAN = """user: Bitte schreib mir eine kurze E-Mail an Frau Schäfer: Die Lieferung der 240 Stühle
verzögert sich um zwei Wochen, weil der Spediteur ausgefallen ist. Neuer Liefertermin ist der 28.
Oktober. Wir bieten ihr als Entschädigung 5 % Rabatt auf die nächste Bestellung an. Der Ton soll
freundlich, aber sachlich sein, und am Ende soll meine Durchwahl 0711-48392 stehen."""

JAPANESE = (
    "user: 来週の月曜日に東京の本社で四半期レビューがあります。"
    "資料は「売上報告2024Q3.pptx」で、15枚目のグラフが間違っているので直してほしいです。"
    "営業部の田中さんが数字を確認してくれました。会議は午前10時からです。"
)

RUSSIAN = """ever: Я проверил резервные копии: последняя полная копия базы данных orders
была сделана 3 ноября в 02:15, её размер 14,2 ГБ, она лежит в бакете
s3://backups-prod/orders/. Инкрементальные копии после 5 ноября не создавались, потому что
истёк ключ доступа сервисного аккаунта backup-bot. Нужно выпустить новый ключ и перезапустить
задание в cron."""

RENT = """user: ok so here's the situation. my landlord emailed yesterday saying the rent goes up
from 1,150 to 1,320 euros starting in february. the contract says increases need three months'
notice and have to be justified with the local rent index (Mietspiegel). he didn't attach
anything. i want to reply politely but firmly, ask for the calculation based on the Mietspiegel,
and point out that february is less than three months away. can you also check if 14.8% is even
allowed? i think there's a cap"""

# a merge's input: its two lines, with their heads
MERGE = (
    "96+8|user: wants nightly backups of ~/notes to the NAS (192.168.1.20) via rsync, keep 7 "
    "copies; ever: wrote backup.sh with rsync -a --delete and date-stamped folders, proposed cron "
    "02:00",
    '104+8|tool: shell crontab -l; echo: (empty); ever: added "0 2 * * * ~/bin/backup.sh" to '
    "crontab; user: asks to also mail a report on failure; ever: added mail to root on non-zero "
    "exit",
)

HONEST = [
    (
        TRIP,
        "user: flying to Lisbon Thu 14 March on TP 1357 from Frankfurt, 07:40, terminal 1; "
        "booking QX7RTA, seat 23F; wants a 4-day packing list, reminder that hotel Casa do Rio "
        "(Rua das Flores 12) checks in after 15:00, power adapter check; must cancel Friday gym.",
    ),
    (
        TRIP,
        "user: Lisbon trip next Thursday (14 March), flight TP 1357 FRA 07:40 T1, ref QX7RTA, "
        "seat 23F; asks for packing list (4 days), hotel check-in reminder (after 15:00, Casa do "
        "Rio), whether a power adapter is needed; cancel gym on Friday.",
    ),
    (
        NGINX,
        'ever: 502s are nginx upstream timeouts on /api/export (error.log: "upstream prematurely '
        'closed connection"); gunicorn kills workers at 30 s default --timeout while large '
        "exports take 45-60 s; proposed raising gunicorn timeout and proxy_read_timeout in "
        "/etc/nginx/sites-enabled/app.conf to 120, or a background job; asked whether to apply.",
    ),
    (
        NGINX,
        "ever: diagnosed the 502 errors: gunicorn worker timeout (30s) shorter than large-account "
        "exports (45–60s) on /api/export; suggests timeout 120 for gunicorn and nginx "
        "proxy_read_timeout, or moving export to a background job; awaits go-ahead.",
    ),
    (
        PYTEST,
        "echo: test_rotate_keeps_seven_copies failed (assert 8 == 7: rotate(keep=7) leaves 8 "
        "notes.log.* copies), 5 passed, at tests/test_rotate.py:14.",
    ),
    (
        PYTEST,
        "echo: pytest run of tests/test_rotate.py: 1 failed, 5 passed; rotation keeps one copy "
        "too many (8 instead of 7) in test_rotate_keeps_seven_copies.",
    ),
    (
        GERMAN,
        "user: möchte kurze E-Mail an Frau Schäfer: Lieferung der 240 Stühle verzögert sich um "
        "zwei Wochen (Spediteur ausgefallen), neuer Termin 28. Oktober, 5 % Rabatt auf nächste "
        "Bestellung als Entschädigung; Ton freundlich, sachlich; am Ende Durchwahl 0711-48392.",
    ),
    (  # in English: the facts are checked, the words cannot be
        GERMAN,
        "user: asks for a short, friendly but factual e-mail to Frau Schäfer: delivery of 240 "
        "chairs delayed two weeks (carrier failed), new date 28 October, 5% discount offered; "
        "sign with extension 0711-48392.",
    ),
    (
        GERMAN,
        "user: e-mail to Frau Schäfer: 240 chairs delayed 2 weeks, new date 28 Oct, 5% discount, "
        "extension 0711-48392",
    ),
    (
        JAPANESE,
        "user: 来週月曜に東京本社で四半期レビュー（午前10時から）。"
        "資料「売上報告2024Q3.pptx」の15枚目のグラフが間違っているので修正依頼。"
        "営業部の田中さんが数字を確認済み。",
    ),
    (
        JAPANESE,
        "user: asks to fix the chart on slide 15 of 売上報告2024Q3.pptx before next Monday's "
        "quarterly review at Tokyo HQ (10:00); Tanaka of sales checked the numbers.",
    ),
    (
        RUSSIAN,
        "ever: последняя полная копия базы orders — 3 ноября 02:15, 14,2 ГБ, в "
        "s3://backups-prod/orders/; инкрементальных копий после 5 ноября нет: истёк ключ доступа "
        "сервисного аккаунта backup-bot; нужно выпустить новый ключ и перезапустить задание cron.",
    ),
    (
        RUSSIAN,
        "ever: checked backups: last full backup of orders DB on 3 Nov 02:15 (14.2 GB, "
        "s3://backups-prod/orders/); no incrementals since 5 Nov because backup-bot's access key "
        "expired; new key and cron job restart needed.",
    ),
    (
        RENT,
        "user: landlord announced rent rise 1,150 → 1,320 € from February without Mietspiegel "
        "justification or three months' notice; wants a polite but firm reply requesting the "
        "calculation and noting the short notice; asks whether a 14.8% increase is allowed.",
    ),
    (
        RENT,
        "user: landlord raised rent to 1,320 euros (+14.8%) from February; user disputes notice "
        "period and missing rent-index justification; needs a reply and a check of the legal cap.",
    ),
    (
        "\n".join(MERGE),
        "user: nightly rsync backups of ~/notes to NAS 192.168.1.20, keep 7 copies; ever: wrote "
        'backup.sh (rsync -a --delete, date-stamped folders), cron 02:00 added ("0 2 * * * '
        '~/bin/backup.sh"); user: mail a report on failure; ever: added mail to root on non-zero '
        "exit.",
    ),
    (
        "\n".join(MERGE),
        "user asked for nightly backups of ~/notes to the NAS, 7 copies kept; ever wrote "
        "backup.sh with rsync and scheduled it at 02:00 in crontab, then added a failure mail to "
        "root.",
    ),
]

INVENTED = [
    # the issue's own example: a trip with a flight number and a ticket code became this
    (TRIP, "user: your request was approved.", ()),
    (TRIP, "user: flying to Lisbon on LH 4521, booking ref ZK3P9Q; wants a packing list.", None),
    (TRIP, "user: booked a trip; details saved in ~/travel/lisbon.md.", ("~/travel/lisbon.md",)),
    (NGINX, "ever: fixed the 502 by restarting the database server and clearing the cache.", ()),
    (NGINX, "ever: raised timeout in /etc/gunicorn.conf.py to 300.", None),
    (NGINX, "ever: a DNS fault at the provider; ticket INC-20931 opened.", ("INC-20931",)),
    (PYTEST, "echo: test_backup_restore failed with KeyError in src/backup.py:88.", None),
    (GERMAN, "user: Frau Schäfer hat die Rechnung 2024-118 bezahlt.", ("2024", "118")),
    (GERMAN, "user: möchte Termin mit Herrn Becker am Montag verschieben.", ()),
    (JAPANESE, "user: 大阪支社で新製品の発表会があり、佐藤さんが担当。", ()),
    (JAPANESE, "user: 資料「予算計画2025.xlsx」を送ってほしい。", None),
    (RUSSIAN, "ever: all backups are fine; stored at s3://archive-eu/db/.", None),
    (RENT, "user: signed the new lease for 1,450 euros and moves out in April.", ("450",)),
    ("\n".join(MERGE), "ever: backups go to 10.0.0.5 every hour via borg.", ("10.0.0.5",)),
    ("\n".join(MERGE), "ever: migrated everything to Dropbox; deleted the NAS share.", ()),
]


@pytest.mark.parametrize(("source", "line"), HONEST)
def test_honest_lines_pass(source: str, line: str) -> None:
    verdict = check(line, source_of(source))
    assert verdict.grounded, verdict


@pytest.mark.parametrize(("source", "line", "missing"), INVENTED)
def test_invented_lines_fail(source: str, line: str, missing: tuple[str, ...] | None) -> None:
    """`missing`: the facts named as not found (None: some; (): none, the words tell)."""
    verdict = check(line, source_of(source))
    assert not verdict.grounded
    if missing is None:
        assert verdict.missing
    else:
        assert verdict.missing == missing
    assert verdict.low_share or verdict.missing
    assert verdict.reason()


def test_a_made_up_flight_number_and_code_are_named() -> None:
    line = "user: flying to Lisbon on LH 4521, booking ref ZK3P9Q; wants a packing list."
    verdict = check(line, source_of(TRIP))
    assert verdict.missing == ("ZK3P9Q", "4521")
    assert verdict.reason() == "not in its input: ZK3P9Q, 4521"


def test_the_default_share_is_the_configs() -> None:
    assert MIN_SHARED == MIN_SHARED_WORDS


def test_no_share_rule_at_zero() -> None:
    verdict = check("user: your request was approved.", source_of(TRIP), min_shared=0)
    assert verdict.grounded


@pytest.mark.parametrize(
    ("line", "source"),
    [
        ("12,844 tokens", "about 12844 tokens"),
        ("12844 tokens", "about 12,844 tokens"),
        ("12 844 tokens", "12844"),
        ("flight lh4521", "Flight LH 4521"),
        ("code ab-1234", "the code is AB1234"),
        ("2025-03-14", "on 14 March 2025"),
        ("at 10:30", "10.30 o'clock"),
        ("a 10GB disk", "10 gigabytes"),
        ("the 14th", "March 14"),
        ("Python v3.12", "Python 3.12.1"),
        ("see `rotate()`", "def rotate(path): ..."),
        ("ＡＢ１２３４", "ab1234"),  # full-width forms are the same characters (NFKC)
        ("STRASSE 12", "Straße 12"),
    ],
)
def test_facts_are_found_in_another_case_and_form(line: str, source: str) -> None:
    assert not check(line, source_of(source)).missing


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("see https://example.com/a?b=1, then", ["https://example.com/a?b=1"]),
        ("mail ops@example.org now", ["ops@example.org"]),
        ("in /etc/nginx/app.conf and ~/notes", ["/etc/nginx/app.conf", "~/notes"]),
        ("edit src/app.py:88 (and ./run.sh)", ["./run.sh", "src/app.py:88"]),
        ("the NAS at 192.168.1.20", ["192.168.1.20"]),
        ("config.toml and README.md", ["config.toml", "README.md"]),
        ("flight LH4521, ref QX7-9RT", ["LH4521", "QX7-9RT"]),
        ("x86_64 build of sha256sum", ["x86_64", "sha256sum"]),
        ("12,844 tokens in 2024", ["12", "844", "2024"]),
        ("007 and 0012", ["12"]),
        # not facts: prose, a single digit, abbreviations, units and ordinals, short codes
        ("and/or e.g. i.e. etc. U.S. 3 files", []),
        ("a 4-day trip, 10GB, the 14th, 3x faster, T1, Q3", ["10", "14"]),
        ("version v3.12", ["12"]),
    ],
)
def test_facts(line: str, expected: list[str]) -> None:
    assert facts(line) == expected


def test_quotes() -> None:
    line = "said \"ship it\", «вперёд», 「了解」, `make e2e`, the user's 'plan B'"
    assert quotes(line) == ["ship it", "вперёд", "了解", "make e2e", "plan B"]


def test_a_quote_in_other_words_passes_when_its_words_are_the_inputs() -> None:
    source = source_of("user: how do I rotate the nginx logs every week?")
    assert check('user asked "rotate nginx logs every week?"', source).missing == ()
    assert check('user asked "rotate nginx logs"', source).missing == ()
    assert check('user quoted "Sunrise Express"', source).missing == ("Sunrise Express",)


def test_squash() -> None:
    assert squash("LH 4521") == "lh4521"
    assert squash("/etc/Nginx.conf") == "etcnginxconf"


# -- the law: what is copied from the input is grounded -----------------------------------------

TOKENS = [
    "AB-1234",
    "/etc/x.conf",
    '"quoted',
    'name"',
    "日本語テキスト",
    "e\u0301x1",
    "12,844",
    "1st",
    "«Ключ",
    "слово»",
    "https://ex.com/a?b=1,",
    "mail@ex.org.",
    "`code`",
    "C:\\Users\\x",
    "v3.12",
    "x86_64",
    "0007",
    "１２３",
    "4-day",
    "./run.sh)",
    "src/a.py:88",
    "ZK3P9Q",
]
token = st.one_of(st.sampled_from(TOKENS), st.text(min_size=1, max_size=8))


@given(
    st.lists(token, min_size=1, max_size=40),
    st.lists(st.integers(0, 1_000), min_size=1, max_size=30),
    st.sampled_from([" ", "\n", "  "]),
)
def test_a_line_of_tokens_copied_from_its_input_is_grounded(
    tokens: list[str], picks: list[int], separator: str
) -> None:
    """Any whitespace-separated tokens of the input, in any order, repeated or not."""
    text = separator.join(tokens)
    copied = text.split()
    if not copied:
        return
    line = " ".join(copied[pick % len(copied)] for pick in picks)
    verdict = check(line, source_of(text))
    assert verdict.grounded, verdict


@given(st.text(), st.lists(st.integers(0, 1_000), min_size=1, max_size=30))
def test_a_line_copied_from_any_text_is_grounded(text: str, picks: list[int]) -> None:
    copied = text.split()
    if not copied:
        return
    line = " ".join(copied[pick % len(copied)] for pick in picks)
    assert check(line, source_of(text)).grounded


@given(st.text(min_size=1, max_size=200))
def test_a_line_is_grounded_in_itself(line: str) -> None:
    assert check(line, source_of(line)).grounded
