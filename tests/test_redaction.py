"""Redaction of secrets, literal and encoded: a command that prints a key in base64, hex or
reversed leaves no copy of it in the log (which keeps everything, forever)."""

from __future__ import annotations

import base64
import shutil
import subprocess
import sys
from collections.abc import Callable

import pytest

from evertalk.config import (
    LOCAL_API_KEY,
    REDACTED,
    SECRET_MIN_LENGTH,
    Config,
    Secret,
    is_credential,
    redact,
    secret_values,
)
from key_encodings import ENCODINGS, encode

KEY = "sk-ant-api03-Zx9_Qw-7Hq2LmN0pRsTuVwXyZ+ab/cdEf12345"  # '+' and '/' differ in the alphabets


def stripped(text: str) -> str:
    """`text` with every `[redacted]` and line break taken out: what is left of the secret."""
    return text.replace(REDACTED, "").replace("\n", "")


def assert_gone(text: str, form: str) -> None:
    """The redacted text holds no run of 12 characters of `form` (the encoded secret)."""
    left = stripped(redact(text, [KEY]))
    assert REDACTED in redact(text, [KEY])
    for start in range(len(form) - 12):
        assert form[start : start + 12] not in left, (form, left)


def test_the_literal_is_redacted() -> None:
    assert redact(f"key={KEY};", [KEY]) == f"key={REDACTED};"
    assert redact("nothing here", [KEY]) == "nothing here"


@pytest.mark.parametrize("prefix", [b"", b"p", b"pr", b"prefix", b"prefix-", b"prefix-x"])
@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode])
def test_base64_at_every_offset_is_redacted(
    prefix: bytes, encode: Callable[[bytes], bytes]
) -> None:
    encoded = encode(prefix + KEY.encode() + b"suffix").decode()
    middle = encode(KEY.encode()).decode().rstrip("=")
    out = redact(f"output: {encoded}\n", [KEY])
    assert out.startswith("output: ") and out.endswith("\n")
    assert_gone(f"output: {encoded}\n", middle[2:-2])
    # the bytes around the key are still there, as far as they are the key's neighbours alone
    assert out.endswith(encode(prefix + KEY.encode() + b"suffix").decode()[-4:] + "\n")


def test_base64_as_the_base64_command_wraps_it() -> None:
    wrapped = base64.encodebytes(b"x" + KEY.encode() * 2).decode()  # lines of 76 characters
    assert "\n" in wrapped.strip()
    assert_gone(wrapped, base64.b64encode(KEY.encode()).decode()[2:-2])


def test_hex_in_either_case_is_redacted() -> None:
    low = KEY.encode().hex()
    for form in (low, low.upper(), f"{low[:40]}\n{low[40:]}"):
        assert redact(f"<{form}>", [KEY]) == f"<{REDACTED}>"


def test_the_reversed_key_is_redacted() -> None:
    assert redact(f"rev: {KEY[::-1]}!", [KEY]) == f"rev: {REDACTED}!"


def test_only_real_credentials_are_redacted() -> None:
    """A value too short to be a key is not redacted, as it is or encoded: `abc` and its
    base64 are parts of ordinary words, and the log would keep them garbled forever. Nor is the
    placeholder evertalk sends a local server that needs no key: every error naming the server
    read `http://[redacted]host:11434`."""
    assert redact("abc YWJj cba 616263", ["abc"]) == "abc YWJj cba 616263"
    assert redact("text", []) == "text"
    assert redact("text", [""]) == "text"
    assert LOCAL_API_KEY == "local"
    assert not is_credential(LOCAL_API_KEY) and not is_credential("x" * (SECRET_MIN_LENGTH - 1))
    assert is_credential(KEY) and is_credential("x" * SECRET_MIN_LENGTH)
    assert redact("http://localhost:11434", [LOCAL_API_KEY]) == "http://localhost:11434"
    config = Config(provider="ollama", api_key=Secret(LOCAL_API_KEY))
    assert secret_values(config, env={}) == []
    config = Config(provider="vllm", api_key=Secret("vllm-key-0123456789"))
    assert secret_values(config, env={}) == ["vllm-key-0123456789"]


def test_the_longest_secret_wins() -> None:
    other = KEY[:20]
    text = f"{base64.b64encode(KEY.encode()).decode()} {KEY}"
    assert redact(text, [other, KEY]) == f"{REDACTED} {REDACTED}"


def test_redaction_leaves_clean_text_as_it_is() -> None:
    """A clean 30,000-character text, the usual case, comes back unchanged, again and again
    (its speed is measured by `make bench`: bench/edge_timings.py)."""
    keys = [KEY, KEY[::-1] + "more", "sk-or-v1-" + "a1b2c3d4" * 9]
    text = "ordinary output, line after line, with paths /usr/lib and numbers 12345\n" * 400
    for _ in range(3):
        assert redact(text, keys) == text


# -- encodings a command can easily make (issue 23) --------------------------------------------

HEAD = b"a line before the key, long enough to fill the first rows: "
TAIL = b" and a line after it, as long, that the dump shows on its own rows.\n"


def command_output(command: list[str], data: bytes) -> str:
    """What `command` prints for `data` on its standard input; the test skips without it."""
    if shutil.which(command[0]) is None:
        pytest.skip(f"{command[0]} is not installed")
    done = subprocess.run(command, input=data, capture_output=True, check=True)
    return done.stdout.decode()


def key_runs(text: str, length: int = 6) -> list[str]:
    """The runs of `length` characters of the key left in `text`, spaces and breaks ignored."""
    flat = "".join(redact(text, [KEY]).split())
    return [
        KEY[i : i + length] for i in range(len(KEY) - length + 1) if KEY[i : i + length] in flat
    ]


def assert_dump_redacted(dump: str, units: list[str]) -> None:
    """No 3 units of the key's dump in a row, and no 6 of its characters (the text column) are
    left; the rows before and after the key are kept as they were."""
    out = redact(dump, [KEY])
    assert REDACTED in out, dump
    flat = "".join(out.lower().split())
    for start in range(len(units) - 2):
        assert "".join(units[start : start + 3]) not in flat, (units[start : start + 3], out)
    assert key_runs(dump) == [], out
    lines = dump.splitlines()
    assert out.splitlines()[0] == lines[0] and out.splitlines()[-1] == lines[-1], out


def words(data: bytes, size: int, offset: int) -> list[bytes]:
    """The `size`-byte words of a dump that starts `offset` bytes before `data`, wholly in it."""
    start = -offset % size
    return [data[i : i + size] for i in range(start, len(data) - size + 1, size)]


@pytest.mark.parametrize("shift", range(4))
@pytest.mark.parametrize(
    "command",
    [["xxd"], ["xxd", "-g1"], ["xxd", "-u"], ["od", "-A", "x", "-t", "x1z"], ["hexdump", "-C"]],
)
def test_hex_dumps_byte_by_byte_are_redacted(command: list[str], shift: int) -> None:
    """xxd's rows (grouped hex, the key split over two rows of its text column), od's and
    hexdump's spaced bytes."""
    dump = command_output(command, HEAD + b"x" * shift + KEY.encode() + TAIL)
    assert_dump_redacted(dump, [f"{byte:02x}" for byte in KEY.encode()])


@pytest.mark.parametrize("shift", range(4))
@pytest.mark.parametrize("size", [2, 4])
def test_od_words_in_the_machines_order_are_redacted(size: int, shift: int) -> None:
    """`od -x` and `od -t x4` print words, their bytes swapped on a little-endian machine."""
    data = HEAD + b"x" * shift + KEY.encode()
    dump = command_output(["od", "-t", f"x{size}"], data + TAIL)
    order = sys.byteorder
    units = [
        f"{int.from_bytes(w, order):0{2 * size}x}"
        for w in words(KEY.encode(), size, len(data) - len(KEY))
    ]
    assert_dump_redacted(dump, units)


@pytest.mark.parametrize("shift", range(2))
@pytest.mark.parametrize("command", [["od"], ["od", "-b"], ["od", "-c"]])
def test_od_octal_and_characters_are_redacted(command: list[str], shift: int) -> None:
    data = HEAD + b"x" * shift + KEY.encode()
    dump = command_output(command, data + TAIL)
    offset = len(data) - len(KEY)
    if command == ["od"]:
        units = [f"{int.from_bytes(w, sys.byteorder):06o}" for w in words(KEY.encode(), 2, offset)]
    elif command == ["od", "-b"]:
        units = [f"{byte:03o}" for byte in KEY.encode()]
    else:
        units = list(KEY)
    assert_dump_redacted(dump, units)


@pytest.mark.parametrize("prefix", [b"", b"p", b"pr", b"pre", b"pref", b"prefix"])
def test_base32_at_every_offset_is_redacted(prefix: bytes) -> None:
    encoded = command_output(["base32"], prefix + KEY.encode() + b"suffix\n")
    assert "\n" in encoded.strip()  # wrapped at 76 characters
    middle = base64.b32encode(KEY.encode()).decode()
    assert_gone(encoded, middle[8:-8])


def test_rot13_is_redacted() -> None:
    rotated = command_output(["tr", "A-Za-z", "N-ZA-Mn-za-m"], f"key: {KEY}\n".encode())
    assert redact(rotated, [KEY]) == f"xrl: {REDACTED}\n"


def test_characters_separated_by_spaces_are_redacted() -> None:
    spaced = command_output(["sed", "s/./& /g"], f"{KEY}\n".encode())
    assert redact(f"out: {spaced}", [KEY]).split() == ["out:", REDACTED]
    for separator in ("  ", "\t", "\n"):
        assert redact(separator.join(KEY), [KEY]) == REDACTED


@pytest.mark.parametrize("prefix", [b"", b"p", b"pr", b"a longer prefix of 41 characters, or so.."])
def test_rev_then_base64_is_redacted(prefix: bytes) -> None:
    out = command_output(["base64"], prefix + KEY.encode()[::-1] + b"\n")
    assert_gone(out, base64.b64encode(KEY[::-1].encode()).decode()[2:-2])


@pytest.mark.parametrize("shift", range(0, 76, 7))
def test_base64_then_rev_is_redacted(shift: int) -> None:
    """`rev` turns each of base64's 76-character rows around: a key that spans two rows shows
    as the end of one turned row and the start of the next."""
    encoded = command_output(["base64"], b"x" * shift + KEY.encode() + b" and more after it\n")
    out = command_output(["rev"], encoded.encode())
    middle = base64.b64encode(KEY.encode()).decode()[4:-4]
    left = redact(out, [KEY])
    assert REDACTED in left, out
    unturned = "".join(line[::-1] for line in left.splitlines())
    for start in range(len(middle) - 8):
        assert middle[start : start + 8] not in unturned, left


@pytest.mark.parametrize("name", sorted(set(ENCODINGS) - {"gzip-base64", "split"}))
def test_the_second_line_catches_the_cheap_encodings(name: str) -> None:
    """Redaction is not what keeps a key from a command (the sealed service is): it catches
    the forms that cost a pattern, all of those a command printed but compressed or split."""
    key = "sk-ant-second-LINE-0123456789abcdef"
    shown = encode(name, key)
    assert redact(shown, [key]) != shown
    assert "second-LINE" not in redact(shown, [key]) and "SECOND-LINE" not in redact(shown, [key])
