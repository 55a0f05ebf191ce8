"""Source snippets for located errors: the numbered line and a caret under the column.

Pure text formatting; knows nothing about YAML, templates or pipelines.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from gen.errors import ConfigError

E = TypeVar("E", bound=ConfigError)


def snippet(lines: Sequence[str], line: int, col: int, width: int = 1) -> str:
    """rustc-style excerpt of `lines` (1-based `line`, `col`) with `width` carets."""
    text = lines[line - 1] if 1 <= line <= len(lines) else ""
    gutter = str(line)
    pad = " " * len(gutter)
    col = max(1, min(col, len(text) + 1))
    # keep tabs so the caret lines up with what the terminal shows above it
    indent = "".join(ch if ch == "\t" else " " for ch in text[: col - 1])
    width = max(1, min(width, len(text) - (col - 1)))
    return f"{pad} |\n{gutter} | {text}\n{pad} | {indent}{'^' * width}"


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
