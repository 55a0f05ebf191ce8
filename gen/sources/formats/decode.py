"""Bytes that claim to be text, as text: UTF-8 (a BOM allowed), line ends made `\n`.
A NUL byte, or more than a small share of bytes that are not UTF-8, means it is not text."""

from __future__ import annotations

from gen.sources.document import Unreadable

BAD_SHARE = 0.01  # the share of characters that may be invalid UTF-8 (a stray Latin-1 byte)
REPLACEMENT = "\ufffd"


def decode(data: bytes) -> str:
    if b"\0" in data:
        raise Unreadable("binary content (it holds NUL bytes), not text")
    text = data.decode("utf-8-sig", errors="replace")
    bad = text.count(REPLACEMENT) - data.count(REPLACEMENT.encode())
    if bad > BAD_SHARE * len(text):
        raise Unreadable(f"not UTF-8 text ({bad} bytes are not UTF-8); save it as UTF-8")
    return text.replace("\r\n", "\n").replace("\r", "\n")
