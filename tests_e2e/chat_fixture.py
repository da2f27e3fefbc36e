"""A 100-message chat written straight into a fresh home, as an import or a restored backup
would leave it: messages only (SPEC §1.2), no tree and no `view.json`, so that every summary
is still to be built and `evertalk memory compact` has the whole tree to make.

The chat is a plausible one: errands, a trip and a small software project, full of the things
a summary must not invent (flight numbers, ticket codes, paths, amounts, names). A quarter of
the messages are long replies (over 512 bytes with their kind), so that their leaves need a
model call; the others are short, so that their leaves are free (SPEC §2.3) and the merges
above them carry the rest of the work.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

DAYS = ("2026-11-20", "2026-11-21")


@dataclass(frozen=True)
class Errand:
    """The facts of one thread of the chat; four messages are made from each."""

    subject: str
    code: str
    place: str
    amount: str
    path: str
    person: str
    date: str


# Each errand on two lines: subject | reference | place | amount, then path | person | date.
_TABLE = """
flight to Lisbon | TP 1351 | Zurich airport | CHF 214
    ~/trips/lisbon/flight.pdf | Marta Reis | 14 March
hotel in Porto | BK-77102 | Casa do Rio | EUR 386
    ~/trips/porto/hotel.txt | Jonas Weber | 16 March
train to Coimbra | CP-4420 | Porto Campanha | EUR 19.60
    ~/trips/coimbra.md | Ines Costa | 18 March
dentist appointment | DX-0932 | Seefeldstrasse 12 | CHF 180
    ~/health/dentist-2026.txt | Dr. Anna Keller | 3 December
car service | SRV-5518 | Garage Huber | CHF 640
    ~/car/service-log.csv | Peter Huber | 9 December
tax return | ZH-2025-8841 | the canton portal | CHF 1,275
    ~/admin/tax/2025/return.pdf | Sandra Meier | 31 March
backup script | v2.3.1 | the NAS at 192.168.4.20 | 14 GB
    ~/bin/backup-photos.sh | rsync | every Sunday
log rotation bug | ISSUE-482 | the staging server | 3.2 GB
    /etc/logrotate.d/evertalk | Lena Fischer | 2 December
birthday dinner | TBL-2207 | Restaurant Linde | CHF 95 a head
    ~/notes/birthday.md | Oma Ruth | 12 January
library books | LIB-30419 | the Pestalozzi library | CHF 4 in fees
    ~/notes/reading-list.md | Ursula K. Le Guin | 5 December
flat lease renewal | LEASE-1190 | Kalkbreite 6 | CHF 2,140 a month
    ~/admin/lease-2027.pdf | Herr Brunner | 1 April
photo book order | PB-66031 | the print shop | EUR 58.90
    ~/photos/2026/book/layout.indd | Fotoprint AG | 20 December
conference talk | TALK-118 | Room B2 at the ETH | 25 minutes
    ~/talks/memory-trees/slides.key | Prof. Daniel Roth | 28 January
insurance claim | CLM-907345 | Helvetia | CHF 730
    ~/admin/claims/bike-theft.pdf | Frau Steiner | 8 December
running plan | 10K-PLAN-3 | the Sihl path | 42 km a week
    ~/health/running.csv | coach Mirco | 26 April
database migration | MIG-0057 | the prod replica | 41 million rows
    migrations/0057_split_usage.sql | Tobias Graf | 4 December
passport renewal | PP-X4419802 | the Stadthaus | CHF 145
    ~/admin/passport-form.pdf | the Einwohneramt | 15 January
bike repair | REP-2291 | Velo Zueri | CHF 118
    ~/notes/bike.md | Sami Yilmaz | 6 December
gift for Clara | ORD-552871 | the Orell Fuessli shop | CHF 64
    ~/notes/gifts-2026.md | Clara Berger | 24 December
plumber visit | JOB-3375 | the bathroom at Kalkbreite 6 | CHF 260
    ~/admin/home/plumber.txt | Roland Frei | 10 December
newsletter draft | NL-2026-12 | the Substack editor | 1,100 words
    ~/writing/newsletter/december.md | Mara Vogt | 7 December
cloud bill | INV-88213 | the hosting account | USD 73.40
    ~/admin/bills/cloud-2026-11.pdf | Hetzner support | 30 November
piano lessons | LES-12 | the music school on Zollstrasse | CHF 90 a lesson
    ~/notes/piano.md | Herr Okafor | 11 December
visa for Japan | JP-EVISA-7731 | the consulate in Geneva | JPY 3,000
    ~/trips/japan/visa-checklist.md | Keiko Tanaka | 2 February
kitchen scale | RMA-60714 | the Digitec pickup point | CHF 39.90
    ~/admin/returns.md | Digitec service | 13 December
"""


def _errands(table: str) -> tuple[Errand, ...]:
    rows = table.strip().splitlines()
    cells = [
        [cell.strip() for cell in (first + "|" + second).split("|")]
        for first, second in zip(rows[::2], rows[1::2], strict=True)
    ]
    return tuple(Errand(*row) for row in cells)


ERRANDS = _errands(_TABLE)


def _short_question(errand: Errand) -> str:
    return f"Can you sort out the {errand.subject}? {errand.person} is involved."


def _short_answer(errand: Errand) -> str:
    return (
        f"Done: the {errand.subject} is set for {errand.date} at {errand.place}, "
        f"reference {errand.code}. I saved the details in {errand.path}."
    )


def _follow_up(errand: Errand) -> str:
    return f"What exactly did we agree for the {errand.subject}, and what does it cost?"


def _long_answer(errand: Errand) -> str:
    """A reply well over 512 bytes, so that its leaf needs a model call."""
    return (
        f"Here is everything about the {errand.subject}. The reference is {errand.code}, and "
        f"it is confirmed for {errand.date} at {errand.place}. The cost is {errand.amount}, "
        f"which I noted next to the booking in {errand.path} so you can find it again. "
        f"{errand.person} confirmed by e-mail this morning and asked that you bring the "
        f"reference {errand.code} with you, printed or on your phone. If the date does not "
        f"work, changing it is free until two days before; after that a fee of about a fifth "
        f"of {errand.amount} applies. I also put a reminder in your calendar for the day "
        f"before {errand.date}, at 18:00, and a second one an hour before it starts. Nothing "
        f"else is open on this: once it is done, tell me and I will mark {errand.code} as "
        f"finished in {errand.path}."
    )


def messages() -> list[tuple[str, str]]:
    """The chat's 100 messages as (kind, text), oldest first."""
    out: list[tuple[str, str]] = []
    for errand in ERRANDS:
        out.append(("user", _short_question(errand)))
        out.append(("ever", _short_answer(errand)))
        out.append(("user", _follow_up(errand)))
        out.append(("ever", _long_answer(errand)))
    return out


def write_chat(home: Path) -> int:
    """Write the messages into `<home>/chat/main/` (SPEC §1.2), spread over two days; the
    number of messages written."""
    main = home / "chat" / "main"
    main.mkdir(mode=0o700, parents=True, exist_ok=True)
    (home / "chat").chmod(0o700)
    chat = messages()
    half = len(chat) // 2
    for day_index, day in enumerate(DAYS):
        lines: list[str] = []
        for i in range(day_index * half, len(chat) if day_index else half):
            kind, text = chat[i]
            minute = i % 60
            hour = 9 + i // 60
            record = {
                "i": i,
                "kind": kind,
                "text": text,
                "size": len(text.encode("utf-8")),
                "date": f"{day}T{hour:02d}:{minute:02d}:00+00:00",
            }
            lines.append(json.dumps(record, ensure_ascii=False))
        (main / f"{day}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(chat)
