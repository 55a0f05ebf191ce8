"""Source snippets for located errors: the numbered line and a caret under the column, and
the line and column of a character or of a byte that is not UTF-8.

Pure text formatting; knows nothing about YAML, templates or pipelines.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import TypeVar

from gen.errors import ConfigError

E = TypeVar("E", bound=ConfigError)

CONTEXT = 80  # characters of a long line shown either side of the column
# control characters would act on the terminal; show their Unicode pictures instead
_PICTURES = {code: chr(0x2400 + code) for code in range(0x20) if code != 0x09} | {0x7F: "␡"}
_PICTURES |= {code: "�" for code in range(0x80, 0xA0)}


def snippet(lines: Sequence[str], line: int, col: int, width: int = 1) -> str:
    """rustc-style excerpt of `lines` (1-based `line`, `col`) with `width` carets; a long
    line is clipped to CONTEXT characters either side of the marked text."""
    text = lines[line - 1] if 1 <= line <= len(lines) else ""
    gutter = str(line)
    pad = " " * len(gutter)
    col = max(1, min(col, len(text) + 1))
    width = max(1, min(width, len(text) - (col - 1), CONTEXT))
    start = max(0, col - 1 - CONTEXT)
    end = min(len(text), col - 1 + width + CONTEXT)
    head = "…" if start > 0 else ""
    shown = text[start:end].translate(_PICTURES)
    tail = "…" if end < len(text) else ""
    before, marked = head + shown[: col - 1 - start], shown[col - 1 - start :][:width]
    # keep tabs so the caret lines up with what the terminal shows above it
    indent = "".join(ch if ch == "\t" else " " * _cells(ch) for ch in before)
    carets = "^" * max(1, sum(_cells(ch) for ch in marked))
    return f"{pad} |\n{gutter} | {head}{shown}{tail}\n{pad} | {indent}{carets}"


def _cells(ch: str) -> int:
    """Terminal columns of one character: CJK and most emoji take two, combining marks none."""
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def position(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of `text[offset]`, lines split as str.splitlines does."""
    pieces = (text[:offset] + "x").splitlines()
    return len(pieces), len(pieces[-1])


def decode_source(data: bytes, file: str, cls: type[E]) -> str:
    """`data` as UTF-8; a byte that is not UTF-8 is a `cls` error at its line and column."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", errors="replace")
        line, col = position(text, len(data[: exc.start].decode("utf-8", errors="replace")))
        message = f"invalid UTF-8 (byte 0x{data[exc.start]:02x}); save the file as UTF-8"
        raise located_error(message, file, text.splitlines(), line, col, 1, cls) from None


def located_error(
    message: str,
    file: str,
    lines: Sequence[str],
    line: int,
    col: int,
    width: int,
    cls: type[E],
) -> E:
    """A ConfigError (or the subclass `cls`) at FILE:LINE:COL carrying its snippet."""
    return cls(message, file=file, line=line, col=col, snippet=snippet(lines, line, col, width))
