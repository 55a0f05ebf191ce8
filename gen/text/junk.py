"""Junk: lines and runs without a letter or digit (emoji, symbols, broken bytes) in text that
streams in. Markdown's own syntax lines and code are not junk. Pure text, torch-free."""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

# inside a line, a stretch of this many characters without a letter or digit is a run
JUNK_RUN_CHARS = 16
# punctuation passes at once up to this many characters in a stretch (a sentence end, a
# quote, markup); a symbol, an emoji or a longer stretch is held until it ends
PLAIN_PASS = 8
# junk lines in a row, or junk characters in a row (no word between them): no longer a
# stray line but the text gone to junk, which cuts the round
JUNK_ROW_LINES = 3
JUNK_ROW_CHARS = 100

_THEMATIC = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*")
_SETEXT = re.compile(r" {0,3}=+[ \t]*")
_TABLE_RULE = re.compile(r"[ \t]*\|?(?:[ \t]*:?-+:?[ \t]*\|)+(?:[ \t]*:?-+:?[ \t]*)?[ \t]*")
_FENCE = re.compile(r"[ \t]*(?:`{3,}|~{3,})")
_QUOTE = re.compile(r"[ \t]*(?:>[ \t]*)+")
_BRACKETS = re.compile(r"[ \t]*[(){}\[\]]{1,4}[;,]?[ \t]*")  # code written without a fence


def neutral(ch: str) -> bool:
    """Space, a combining mark or a format character (an emoji's joiner): neither a word
    character nor junk."""
    return ch.isspace() or unicodedata.category(ch)[0] == "M" or unicodedata.category(ch) == "Cf"


def plain(ch: str) -> bool:
    """Punctuation (ASCII's, or Unicode's P categories): it passes at once."""
    return (ch.isascii() and ch.isprintable()) or unicodedata.category(ch)[0] == "P"


def syntax_line(line: str) -> bool:
    """A line without a letter or digit that is still Markdown (a rule, a table's rule, a
    fence, a quote marker) or code (brackets); blank lines too. A list or heading marker
    alone is not: nothing follows it."""
    line = line.rstrip("\r\n")
    return (
        not line.strip()
        or any(p.fullmatch(line) for p in (_THEMATIC, _SETEXT, _TABLE_RULE, _QUOTE, _BRACKETS))
        or _FENCE.match(line) is not None
    )


def junk_line(line: str) -> bool:
    """A line with no letter or digit that is not Markdown syntax."""
    return not any(ch.isalnum() for ch in line) and not syntax_line(line)


def fence_line(line: str) -> bool:
    return _FENCE.match(line) is not None


def _counted(text: str) -> int:
    return sum(not neutral(ch) for ch in text)


class JunkFilter:
    """Feed it a text's pieces; it returns what may be kept. A line is held from its start
    until it has a letter or digit; a line that ends without one is dropped unless it is
    Markdown syntax. A blank line is kept (empty) only where it ends a paragraph, not after
    another nor at the start. Inside a line, a stretch without a letter or digit is held
    from its first symbol (or past PLAIN_PASS characters of punctuation) and dropped once
    it reaches JUNK_RUN_CHARS. Fenced code passes untouched. `due` says when the junk in
    a row calls for a cut; `dropped` counts the lines and runs dropped."""

    def __init__(self) -> None:
        self.dropped = 0
        self.sync("")

    def sync(self, text: str) -> None:
        """Start again at the end of `text` (after a cut, or text added from elsewhere):
        nothing held, no junk in a row."""
        self.row_lines = 0
        self.row_chars = 0
        self._due = False
        self._first = ""
        self._held: list[str] = []
        self._line = text[text.rfind("\n") + 1 :]  # the current line, as written so far
        # "start": holding the line until a letter or digit; "text": it has one; "junk": the
        # line is dropped (a word may still end it)
        self._state: Literal["start", "text", "junk"] = "start" if not self._line else "text"
        self._stretch = 0  # characters without a letter or digit since the last one
        self._holding = False
        self._run = False  # the held stretch is a run: it is dropped
        self._tail = text[-2:]  # the end of what was kept: a paragraph break or not
        fences = sum(fence_line(line) for line in text.split("\n")[:-1])
        self._code = fences % 2 == 1

    @property
    def due(self) -> bool:
        """The junk in a row has reached JUNK_ROW_LINES lines or JUNK_ROW_CHARS characters:
        the filter takes nothing more until `sync`."""
        return self._due

    @property
    def first(self) -> str:
        """The first character of the junk in the current row (for the retry to avoid)."""
        return self._first

    def feed(self, piece: str) -> str:
        out: list[str] = []
        for ch in piece:
            if self._due:
                break  # what follows lies past the cut
            self._char(ch, out)
        return self._kept(out)

    def flush(self) -> str:
        """The end of a round: what is held is decided as it stands. A line start of
        punctuation only (a list marker, a table's `|`) is kept, as it may still go on;
        one with a symbol is dropped; the rest of either line, if more comes, is judged
        on its own. Space alone stays held (a blank line, so far)."""
        out: list[str] = []
        if self._state == "start" and "".join(self._held).strip():
            held = "".join(self._held)
            self._held = []
            if all(plain(c) or neutral(c) for c in held):
                out.append(held)
                self._state = "text"
            else:
                self._drop_chars(held)
                self._state = "junk"
        elif self._holding and self._run:
            self._held = []  # dropped; the run may go on in the next round
        elif self._holding:
            self._end_stretch(out)
        return self._kept(out)

    def finish(self) -> str:
        """The end of the text: a held line is judged as a whole line."""
        out: list[str] = []
        if self._state == "start" and self._held:
            self._end_line(out, newline=False)
        elif self._state == "junk":
            self._junk_line_done()
        elif self._holding:
            self._end_stretch(out)
        self._state, self._line = "start", ""
        return self._kept(out)

    # -- one character ------------------------------------------------------------------

    def _char(self, ch: str, out: list[str]) -> None:
        if ch == "\n":
            self._end_line(out, newline=True)
            return
        self._line += ch
        if self._code:
            out.append(ch)
        elif self._state == "start":
            self._held.append(ch)
            if ch.isalnum():
                held, self._held = "".join(self._held), []
                if _counted(held[:-1]) >= JUNK_RUN_CHARS and not syntax_line(held[:-1]):
                    self._drop_chars(held[:-1])  # a run before the line's first word
                    self._run_done()
                    held = ch
                self._state = "text"
                self._word(held, out)
            elif len(self._line) >= JUNK_ROW_CHARS and _counted(self._line) >= JUNK_ROW_CHARS:
                if syntax_line(self._line):
                    return  # a long rule, so far
                self._drop_chars("".join(self._held))  # too long to be anything but junk
                self._held, self._state = [], "junk"
        elif self._state == "junk":
            if ch.isalnum():  # the junk was a run at the line's start, words follow
                self._run_done()
                self._state = "text"
                self._word(ch, out)
            elif not neutral(ch):
                self._drop_chars(ch)
        elif ch.isalnum():
            if self._holding:
                self._end_stretch(out, space=True)
            self._word(ch, out)
        elif neutral(ch):
            (self._held if self._holding else out).append(ch)
        else:
            self._stretch += 1
            if not self._holding and plain(ch) and self._stretch <= PLAIN_PASS:
                out.append(ch)
                return
            self._holding = True
            self._held.append(ch)
            if self._run:
                self._drop_chars(ch)
            elif self._stretch >= JUNK_RUN_CHARS:
                self._run = True
                self._drop_chars("".join(self._held))

    def _word(self, text: str, out: list[str]) -> None:
        """Text that ends with a letter or digit is kept: the row of junk is over."""
        out.append(text)
        self._stretch = 0
        self.row_lines = self.row_chars = 0

    def _end_stretch(self, out: list[str], space: bool = False) -> None:
        """The stretch is over; `space`: a word follows, kept apart from the text before a
        dropped run by one space where the run held it."""
        held, self._held, self._holding = "".join(self._held), [], False
        if self._run:
            self._run = False
            self._run_done()
            before = self._end(out)[-1:]
            if space and held[-1:].isspace() and before and not before.isspace():
                out.append(" ")
        else:
            out.append(held)

    def _end_line(self, out: list[str], newline: bool) -> None:
        line, self._line = self._line, ""
        state, self._state = self._state, "start"
        if self._code or state == "text":
            if self._holding:
                self._end_stretch(out)
            if fence_line(line):
                self._code = not self._code
            out.append("\n" if newline else "")
            self._stretch = 0
            return
        if state == "junk":
            self._junk_line_done()
            return
        held, self._held = "".join(self._held), []
        if junk_line(held):
            self._drop_chars(held)
            self._junk_line_done()
        elif not held.strip():  # a blank line: one ends a paragraph, more are junk
            if newline and self._end(out) not in ("\n\n", ""):
                out.append("\n")
        else:
            if fence_line(held):
                self._code = True
            out.append(held + ("\n" if newline else ""))

    def _drop_chars(self, text: str) -> None:
        if not self.row_chars and not self.row_lines:
            self._first = next((c for c in text if not neutral(c)), "")
        self.row_chars += _counted(text)
        self._due = self.row_lines >= JUNK_ROW_LINES or self.row_chars >= JUNK_ROW_CHARS

    def _junk_line_done(self) -> None:
        self.dropped += 1
        self.row_lines += 1
        self._due = self.row_lines >= JUNK_ROW_LINES or self.row_chars >= JUNK_ROW_CHARS

    def _run_done(self) -> None:
        self.dropped += 1

    def _end(self, out: list[str]) -> str:
        """The last two characters kept, `out` included."""
        return (self._tail + "".join(out))[-2:]

    def _kept(self, out: list[str]) -> str:
        text = "".join(out)
        if text:
            self._tail = (self._tail + text)[-2:]
        return text
