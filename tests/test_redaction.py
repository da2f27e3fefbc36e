"""Redaction of secrets, literal and encoded: a command that prints a key in base64, hex or
reversed leaves no copy of it in the log (which keeps everything, forever)."""

from __future__ import annotations

import base64
import time
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


def test_redaction_of_clean_text_is_fast() -> None:
    """It runs on every log write and every tool result: a clean 30,000-character text, the
    usual case, costs well under a millisecond once the patterns are built."""
    keys = [KEY, KEY[::-1] + "more", "sk-or-v1-" + "a1b2c3d4" * 9]
    text = "ordinary output, line after line, with paths /usr/lib and numbers 12345\n" * 400
    redact(text, keys)  # builds the patterns
    started = time.perf_counter()
    for _ in range(100):
        assert redact(text, keys) == text
    assert (time.perf_counter() - started) / 100 < 0.002
