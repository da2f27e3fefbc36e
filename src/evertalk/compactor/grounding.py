"""Grounded summaries (SPEC §4.8): a cheap check, made on every compaction reply before it is
kept, that the line says nothing its input does not.

Why: a weak summarizer writes fluent lines that are wholly invented (a trip with a flight number
and a ticket code became "your request was approved"), and the agent is told to trust its memory.
Two rules catch most of that without a model call:

1. What can be checked must be found in the input: every number of two or more digits, code that
   mixes letters and digits (`AB-1234`, `LH4521`), path, file name, URL, e-mail or IP address and
   quoted name of the line. They are compared *squashed*: NFKC, case folded, and everything but
   letters and digits dropped, so that `12,844` is found in `12844`, `LH 4521` in `lh4521`, and a
   path however it was quoted. A number is checked one run of digits at a time, so that a date or a
   time written another way (`2025-03-14` for `14 March 2025`) still passes; a quote passes when
   it is verbatim or when each of its words is in the input (a quote put in other words keeps
   them).
2. The line shares enough of its content words with the input: at least `min_shared` of those
   that can be checked. A word is found by its first five letters (`backups` finds `backup`,
   `rotation` finds `rotate`); function words and the words any summary frames with (user,
   asked, explained, …) do not count. Scripts written without spaces (Chinese, Japanese, Thai, …)
   count character by character, and a word counts only when the input has some words of its
   kind of script: a summary may be in another language than its input.

Both rules lean towards passing: a line rejected wrongly costs a retry (at worst, its node is cut
from its input, which is true), while the check exists for inventions, which share little with
their input. The thresholds are set so that honest summaries of real text pass: see
tests/compactor/test_grounding.py.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

MIN_SHARED = 0.5
"""The least share of a line's checkable content words that its input must hold. Honest lines
of the tests' real examples share 0.67 to 1.0, close copies 0.8 and more; invented ones 0 to
0.33, except short ones on the input's own topic (which this rule cannot tell)."""

MIN_WORDS = 2
"""A line with fewer checkable content words is not judged by its share (nor is a script the
input holds fewer words of): too few to tell."""

STEM = 5
"""Words are compared by their first five letters: enough to tell words apart, few enough that
an inflected form (`configured`, `configuration`) finds its kin."""

MIN_CODE = 3
"""A code is checked from three letters and digits on."""

MAX_SHOWN = 8
"""At most this many missing facts are named in a rejection."""

# Scripts written without spaces between words: their words are pairs of characters.
_SPACELESS = (
    "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uf900-\ufaff\U00020000-\U0002fa1f"
)
_WORD = re.compile(rf"[{_SPACELESS}]+|(?:(?![{_SPACELESS}])[^\W\d_])+")
_IS_SPACELESS = re.compile(rf"[{_SPACELESS}]")
_NOT_ALNUM = re.compile(r"[\W_]+")

_URL = re.compile(r"\b(?:https?|ftp|file)://[^\s<>\"'`]+", re.IGNORECASE)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_ADDRESS = re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w.]\d)")  # an IPv4 address
_TOKEN = re.compile(r"\S+")
_PIECE = rf"(?:(?![{_SPACELESS}])\w)+"
_CODE = re.compile(rf"{_PIECE}(?:[-_.:/#+]{_PIECE})*")
_DIGITS = re.compile(r"\d+")
_EDGES = "()[]{}<>\"'`“”‘’«»,;:!?…"
_PATH_START = re.compile(r"^(?:~?/|\.{1,2}/|[A-Za-z]:[\\/])")
_FILE_NAME = re.compile(r"^[\w-]{2,}(?:\.[\w-]+)*\.[^\W\d_]\w{0,7}$")
_NUMBER_WORD = re.compile(r"^(?:\d+(?:[.,]\d+)?(?:[^\W\d_]{1,3}|-[^\W\d_]+)|[vV]\d[\d.]*)$")
"""A number with a unit or an ordinal suffix (`10GB`, `14th`, `502s`, `4-day`) or a version
(`v3.12`): checked by its digits, since the rest is often written another way (`10 gigabytes`,
`four days`, `version 3.12`)."""
_QUOTED = re.compile(
    "|".join(
        (
            r'"([^"\n]{1,200})"',
            r"“([^”\n]{1,200})”",
            r"„([^“”\n]{1,200})[“”]",
            r"«([^»\n]{1,200})»",
            r"「([^」\n]{1,200})」",
            r"『([^』\n]{1,200})』",
            r"`([^`\n]{1,200})`",
            r"(?<!\w)'([^'\n]{1,200})'(?!\w)",
        )
    )
)


def _word_list(text: str) -> frozenset[str]:
    return frozenset(text.split())


STOPWORDS = _word_list(
    """
    the and for are but not you all any can her was one our out his has had how its may new now
    old see two way who did get let put say she too use yes via per off own few nor yet why
    this that with from they them then than there their these those what when where which while
    will would could should shall into onto upon about above after again against also before
    being below between both does doing down during each further having here just more most
    much only other over same some such very were been have your yours itself himself herself
    themselves ours because until once under both whom whose again still even ever also though
    although whether within without across along around among since unless
    user users tool tools echo note work message messages reply replies replied answer
    answered answers asked asks ask asking said says say told tells wants wanted want needs
    needed explained explains mentioned mentions noted discussed discusses agreed agrees
    confirmed confirms suggested suggests proposed proposes described describes reported reports
    requested shared provided provides gave gives summary summarized summarizes conversation
    chat assistant later earlier first next finally regarding including using used ran runs
    called calls output outputs result results returned returns showed shows listed found
    shortly briefly mainly several various details detail item items part parts
    """
)
"""Function words and the words a summary frames its items with: they say nothing of whether
the summary is true to its input."""


FUNCTION_WORDS: dict[str, frozenset[str]] = {
    language: _word_list(words)
    for language, words in {
        "en": "the and of to with that this from is are it for be was were",
        "de": "der die das und ist nicht mit ein eine den dem für auf sich auch von zu",
        "fr": "le la les et est une des pour dans que pas sur avec du au",
        "es": "el la los las y es una que para por con del se no en",
        "it": "il che di è per una non con sono gli del della",
        "pt": "os as um uma que para com não do da em",
        "nl": "het een en is van dat niet met voor op zijn",
    }.items()
}
"""The most frequent words of some languages written in Latin letters: a text whose words hit
one list most (at least twice) is taken to be in that language."""


@dataclass(frozen=True)
class Source:
    """What a line may draw on, prepared once per compaction (`source_of`)."""

    squashed: str  # the input squashed: letters and digits only, case folded
    words: frozenset[str]  # every word of the input, normalized (spaceless scripts: bigrams)
    stems: frozenset[str]  # … and their stems
    spaced: int  # content words of scripts written with spaces
    spaceless: int  # bigrams of scripts written without
    language: str | None  # the input's language or script, when it can be told


@dataclass(frozen=True)
class Verdict:
    """The check of one line: the facts it states that its input lacks, and how many of its
    checkable content words (`counted`) the input holds (`shared`)."""

    missing: tuple[str, ...]
    shared: int
    counted: int
    min_shared: float

    @property
    def low_share(self) -> bool:
        return self.counted >= MIN_WORDS and self.shared < self.min_shared * self.counted

    @property
    def grounded(self) -> bool:
        return not self.missing and not self.low_share

    def reason(self) -> str:
        """Why the line was rejected, in one line (for the ledger and the status)."""
        parts: list[str] = []
        if self.missing:
            parts.append("not in its input: " + ", ".join(self.missing[:MAX_SHOWN]))
        if self.low_share:
            parts.append(f"only {self.shared} of its {self.counted} content words are in its input")
        return "; ".join(parts)


def normalize(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def squash(text: str) -> str:
    """`text` as facts are compared: normalized, letters and digits only."""
    return _NOT_ALNUM.sub("", normalize(text))


def stem(word: str) -> str:
    """A normalized word's stem: a plural `s` dropped, then its first STEM letters."""
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word[:STEM]


def words_of(text: str) -> list[str]:
    """The normalized words of `text`. A run of a spaceless script gives its bigrams (a lone
    character, itself): single characters are shared by any two texts of a language, while an
    honest summary copies its input's compounds and names."""
    words: list[str] = []
    for run in _WORD.findall(normalize(text)):
        if _IS_SPACELESS.match(run) and len(run) > 1:
            words += [run[i : i + 2] for i in range(len(run) - 1)]
        else:
            words.append(run)
    return words


def _spaceless(word: str) -> bool:
    return bool(_IS_SPACELESS.match(word))


def _content(word: str) -> bool:
    return _spaceless(word) or (len(word) >= 3 and word not in STOPWORDS)


def language(words: list[str]) -> str | None:
    """The language a text's words are in, when it can be told: its main script, and for Latin
    letters the language whose function words it uses most. None for a text with no words, or
    in Latin letters with too few function words (code, lists, names)."""
    script = _main_script(words)
    if script != "LATIN":
        return script
    hits = Counter(
        name for word in words for name, common in FUNCTION_WORDS.items() if word in common
    ).most_common(2)
    if not hits or hits[0][1] < 2 or (len(hits) > 1 and hits[1][1] == hits[0][1]):
        return None
    return hits[0][0]


def translated(words: list[str], source: Source) -> bool:
    """Whether a line (its words) is in another language than its input. A line too short to
    tell is taken to be in its input's language, unless it is in another script, or uses an
    English function word and none of its non-English input's language (the prompt is in
    English: that is how a model most often translates)."""
    theirs = source.language
    if theirs is None:
        return False
    mine = language(words)
    if mine is not None:
        return mine != theirs
    if theirs not in FUNCTION_WORDS:  # a script of its own
        return _main_script(words) not in (None, theirs)
    return theirs != "en" and _hits(words, "en") > 0 and _hits(words, theirs) == 0


def _hits(words: list[str], name: str) -> int:
    return sum(word in FUNCTION_WORDS[name] for word in words)


def _main_script(words: list[str]) -> str | None:
    scripts = Counter(_script(word) for word in words).most_common(1)
    return scripts[0][0] if scripts else None


def _script(word: str) -> str:
    if _spaceless(word):
        return "SPACELESS"  # Chinese and Japanese mix several; one is enough to tell
    return unicodedata.name(word[0], "UNKNOWN").split(" ", 1)[0]


def source_of(*texts: str) -> Source:
    """The source of a compaction whose input is `texts` together."""
    joined = "\n".join(texts)
    words = words_of(joined)
    return Source(
        squashed=squash(joined),
        words=frozenset(words),
        stems=frozenset(stem(word) for word in words if not _spaceless(word)),
        spaced=sum(1 for word in words if not _spaceless(word) and _content(word)),
        spaceless=sum(1 for word in words if _spaceless(word)),
        language=language(words),
    )


def check(line: str, source: Source, min_shared: float = MIN_SHARED) -> Verdict:
    """Whether `line` is grounded in `source` (see the module's doc)."""
    # facts are taken from the line in NFKC, as the input is squashed: a fact cut from a
    # character's combining mark would not be found in its composed form
    composed = unicodedata.normalize("NFKC", line)
    missing = [fact for fact in facts(composed) if squash(fact) not in source.squashed]
    missing += [quote for quote in quotes(composed) if not _quote_found(quote, source)]
    shared, counted = _share(line, source)
    return Verdict(tuple(dict.fromkeys(missing)), shared, counted, min_shared)


def _quote_found(quote: str, source: Source) -> bool:
    squashed = squash(quote)
    if not squashed or squashed in source.squashed:
        return True
    return all(squash(piece) in source.squashed for piece in _CODE.findall(quote))


def _share(line: str, source: Source) -> tuple[int, int]:
    """(found, counted): of the line's content words that can be checked, those in the input.

    A word can be checked when the input has MIN_WORDS words of its kind of script, and not at
    all when the line is in another language than its input: a summary in English of a German
    message (the prompt is in English) keeps the facts, not the words."""
    words = words_of(line)
    if translated(words, source):
        return 0, 0
    shared = counted = 0
    for word in filter(_content, words):
        if _spaceless(word):
            if source.spaceless < MIN_WORDS:
                continue
            found = word in source.words
        else:
            if source.spaced < MIN_WORDS:
                continue
            found = word in source.words or stem(word) in source.stems
        counted += 1
        shared += found
    return shared, counted


def quotes(line: str) -> list[str]:
    """The quoted spans of a line: names, titles, strings the line claims are verbatim."""
    found = (next(group for group in match.groups() if group) for match in _QUOTED.finditer(line))
    return [quote.strip() for quote in found if quote.strip()]


def facts(line: str) -> list[str]:
    """The identifier-like tokens of a line, as written: URLs, e-mail and IP addresses, paths
    and file names, codes, then the runs of two or more digits outside all of those."""
    found: list[str] = []
    taken = [False] * len(line)

    def take(start: int, end: int, text: str) -> None:
        found.append(text)
        taken[start:end] = [True] * (end - start)

    for pattern in (_URL, _EMAIL, _ADDRESS):
        for match in pattern.finditer(line):
            if not any(taken[match.start() : match.end()]):
                take(match.start(), match.end(), match.group().rstrip(".,;:!?)]}'\""))
    for match in _TOKEN.finditer(line):
        start, token = _strip_edges(match.start(), match.group())
        if token and not any(taken[start : start + len(token)]) and _path_like(token):
            take(start, start + len(token), token)
    for match in _CODE.finditer(line):
        code = match.group()
        if any(taken[match.start() : match.end()]) or not _code_like(code):
            continue
        take(match.start(), match.end(), code)
    for match in _DIGITS.finditer(line):
        digits = match.group().lstrip("0")
        if len(digits) >= 2 and not any(taken[match.start() : match.end()]):
            found.append(digits)
    return found


def _strip_edges(start: int, token: str) -> tuple[int, str]:
    """A whitespace token without the brackets, quotes and punctuation around it."""
    stripped = token.lstrip(_EDGES)
    start += len(token) - len(stripped)
    return start, stripped.rstrip(_EDGES + ".")


def _path_like(token: str) -> bool:
    if not any(char.isalpha() for char in token):
        return False  # digits and separators (a date, a fraction): checked as numbers
    if _PATH_START.match(token):
        return any(char.isalnum() for char in token)
    separators = token.count("/") + token.count("\\")
    if separators >= 2:
        return True
    last = re.split(r"[\\/]", token)[-1]
    return bool(_FILE_NAME.match(last)) and (separators == 1 or _file_name(last))


def _file_name(token: str) -> bool:
    """`config.toml`, `README.md`, `example.com`; not `e.g` nor `U.S`."""
    stem_part = token.rsplit(".", 1)[0]
    return len(stem_part.split(".")[0]) >= 2


def _code_like(token: str) -> bool:
    if len(squash(token)) < MIN_CODE:
        return False  # `T1`, `Q3`, `F5`: too short to be a fact, often an abbreviation
    has_digit = any(char.isdigit() for char in token)
    has_letter = any(char.isalpha() for char in token)
    return has_digit and has_letter and not _NUMBER_WORD.match(token)
