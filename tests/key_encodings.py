"""The encodings of a key that a command may print it in: those that reached the log before the
service sealed its credentials away (no tests of its own). Each reads the key from stdin."""

from __future__ import annotations

import subprocess

PY = "python3 -c"
B = "sys.stdin.buffer.read()"
T = "sys.stdin.read()"
ENCODINGS: dict[str, str] = {
    "plain": "cat",
    "upper": "tr a-z A-Z",
    "split": "cut -c1-12; echo; printf %s \"$K\" | cut -c13-",
    "gzip-base64": "gzip -n | base64 -w0",
    "base64-base64": "base64 -w0 | base64 -w0",
    "base64": "base64 -w0",
    "base85": f"{PY} 'import sys,base64;print(base64.b85encode(sys.stdin.buffer.read()).decode())'",
    "ascii85": f"{PY} 'import sys,base64;print(base64.a85encode({B}).decode())'",
    "uuencode": f"{PY} 'import sys,binascii;print(binascii.b2a_uu(sys.stdin.buffer.read()[:45]))'",
    "base32hex": "basenc --base32hex",
    "c-array": "od -An -tx1 -v | tr -s ' \\n' ' ' | sed 's/ \\([0-9a-f][0-9a-f]\\)/0x\\1, /g'",
    "od-octal": "od -An -b",
    "od-decimal": "od -An -tu1",
    "hex-colons": "od -An -tx1 -v | tr -s ' \\n' ':'",
    "rev-hex": "rev | od -An -tx1 -v | tr -d ' \\n'",
    "rev": "rev",
    "octal-escapes": f"{PY} 'import sys;print(\"\".join(\"\\\\%03o\" % b for b in {B}))'",
    "u-escapes": f"{PY} 'import sys;print(\"\".join(\"\\\\u%04x\" % ord(c) for c in {T}))'",
    "percent": f"{PY} 'import sys;print(\"\".join(\"%%%02X\" % b for b in {B}))'",
    "commas": "sed 's/./&,/g'",
    "blank-lines": "sed 's/./&\\n\\n/g'",
    "zero-width": "sed 's/./&\\xe2\\x80\\x8b/g'",
    "utf16-repr": f"{PY} 'import sys;print(repr(sys.stdin.read().encode(\"utf-16\")))'",
}  # fmt: skip
"""The encodings that reached the log (the issue's list), each reading the key from stdin."""


def encode(name: str, key: str) -> str:
    """What the encoding `name` prints for `key`, as bash runs it."""
    script = f'K={key}; printf %s "$K" | {ENCODINGS[name]}'
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True).stdout
