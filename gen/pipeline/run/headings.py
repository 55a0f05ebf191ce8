"""Headings inside a section's streamed text: the document's structure belongs to the
pipeline, so a section's own headings are demoted below its heading, or stripped, and a
first line that repeats the section's title is dropped. Works on text, line by line."""

from __future__ import annotations

import re

from gen.pipeline.spec import HeadingMode

_HEADING = re.compile(r"^[ \t]*(#{1,6})[ \t]+(.*?)[ \t#]*$")
_TITLE_LINE = re.compile(r"^[ \t]*(?:#{1,6}[ \t]+|\*\*|__)?(.*?)(?:\*\*|__)?[ \t]*:?[ \t]*$")
_NORMAL = re.compile(r"[\W_]+")
MAX_LINE = 300  # a line held this long is no heading: it passes


def _norm(text: str) -> str:
    return _NORMAL.sub(" ", text.lower()).strip()


class HeadingFilter:
    """Rewrites markdown heading lines as text streams in. A line that starts with '#' is
    held until it is complete; every other line passes through at once. `level` is the
    heading level of the section itself: kept headings go at least one below it."""

    def __init__(self, mode: HeadingMode, title: str = "", level: int = 2) -> None:
        self.mode = mode
        self.title = _norm(title)
        self.min_level = min(level + 1, 6)
        self._line = ""  # the start of the current line, while it may still be a heading
        self._at_line_start = True
        self._first_line = True
        self._written = False  # has any text gone out: blank lines before it are dropped

    def feed(self, piece: str) -> str:
        if self.mode == "keep" and not self.title:
            return piece
        out: list[str] = []
        for chunk in re.split(r"(\n)", piece):
            if not chunk:
                continue
            if chunk == "\n":
                if self._line:
                    line, self._line = self._line, ""
                    rewritten = self._rewrite(line)
                    if rewritten is not None:
                        out.append(rewritten + "\n")
                        self._written = True
                elif self._written:  # (a section never starts with a blank line, as after
                    out.append("\n")  # a dropped title: a held prose grammar refuses one)
                self._at_line_start = True
                continue
            if self._at_line_start or self._line:
                self._line += chunk
                stripped = self._line.lstrip(" \t")
                if not stripped:
                    continue  # only indentation so far
                if len(self._line) <= MAX_LINE and (
                    stripped.startswith(("#", "*", "_")) or self._may_be_title(stripped)
                ):
                    self._at_line_start = False
                    continue  # may be a heading or the title again: wait for the line's end
                out.append(self._line)
                self._line = ""
                self._at_line_start = False
                self._first_line = False
                self._written = True
                continue
            out.append(chunk)
        return "".join(out)

    def _may_be_title(self, start: str) -> bool:
        """Could a first line that starts so still be the section's title?"""
        return self._first_line and bool(self.title) and self.title.startswith(_norm(start))

    def flush(self) -> str:
        """The line held so far, decided as it stands (the end of a round or of the text);
        the rest of that line, if more comes, passes through."""
        line, self._line = self._line, ""
        if not line:
            return ""
        rewritten = self._rewrite(line)
        if rewritten:
            self._written = True
        return rewritten or ""

    def _rewrite(self, line: str) -> str | None:
        """The line as the section keeps it; None to drop it."""
        first, self._first_line = self._first_line, False
        bare = _TITLE_LINE.match(line)
        if first and self.title and bare is not None and _norm(bare.group(1)) == self.title:
            return None  # the section's own title again: the document template writes it
        match = _HEADING.match(line)
        if match is None or self.mode == "keep":
            return line
        if self.mode == "strip":
            return match.group(2)
        level = max(len(match.group(1)), self.min_level)
        return f"{'#' * level} {match.group(2)}"
