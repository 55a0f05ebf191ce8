"""Text goes out as deltas once it can no longer be cut away: the last sentences are held
back (a loop found later may still cut them), and so is a line that may still become a
heading or a list marker."""

from __future__ import annotations

import re

# text is shown once its sentence is complete (a loop found later can still be cut away)
_RELEASE = re.compile(r"(?<!\d)[.!?…][\"'”’)\]]*(?=\s)|[。！？]|\n")
# a line that may still become a heading, a list item or a sibling part's title: held whole
_MARKER = re.compile(r"[ \t]*(?:#|\d+[.)]|[-*+•]|\*\*|__|(?:part|chapter|section)\b)", re.I)
# where a sentence or a line is complete: a section cut off mid-sentence is cut back to it
_COMPLETE = re.compile(r"[.!?…][\"'”’)\]]*(?=\s|$)|[。！？][」』”’）)]*|\n")
_BARE_MARKER = re.compile(r"[ \t]*(?:#+|\d+[.)]|[-*+•])[ \t]*")  # a marker with no text
HELD_SENTENCES = 5  # the last sentences are held back: a loop (a refrain takes 5) is cut unseen
MAX_HELD = 1500  # characters held back without a sentence end before they are shown anyway


def release_end(text: str, shown: int, final: bool = False) -> int:
    """How far `text` may go out, `shown` of it already out: all of it when `final` (but a
    last line that is only a list marker, which the section's end drops); else all but the
    last HELD_SENTENCES sentences, and not into a line that may still become a heading or
    a marker. (At most `shown`: nothing new.)"""
    end = len(text)
    bare = bare_marker_from(text) if final else None
    if bare is not None:
        end = max(shown, bare)
    if not final:
        ends = [m.end() for m in _RELEASE.finditer(text, shown)]
        end = ends[-HELD_SENTENCES - 1] if len(ends) > HELD_SENTENCES else shown
        line = text.rfind("\n", 0, end) + 1
        if end < len(text) and line < end and _MARKER.match(text, line):
            end = max(shown, line)  # that line may still become a marker
        if len(text) - end > MAX_HELD:
            end = len(text)
    return len(text[:end].rstrip())  # whitespace goes out with what follows it


def round_pieces(
    text: str, shown: int, end: int, starts: list[tuple[int, int]], round_no: int | None
) -> list[tuple[int, str]]:
    """text[shown:end] as (round, piece), one piece per round whose text it holds (held
    sentences go out a round later); `starts`: (where, round) for each round's text."""
    cuts = [(at, n) for at, n in starts if shown < at < end]
    first = [n for at, n in starts if at <= shown]
    begin, number = shown, first[-1] if first else round_no or 1
    pieces: list[tuple[int, str]] = []
    for at, n in [*cuts, (end, 0)]:
        at = max(begin, len(text[:at].rstrip()))  # whitespace goes with what follows
        if at > begin:
            pieces.append((number, text[begin:at]))
        begin, number = at, n
    return pieces


def unfinished_from(text: str) -> int | None:
    """Where the unfinished sentence that ends `text` begins (the text was cut off in the
    middle of it): after the last sentence end or line break, and before a list marker or
    heading mark left with nothing after it. None where the text ends a sentence or a
    line, or completes none at all (then nothing is left to keep)."""
    body = text.rstrip(" \t")
    if not body.strip() or body.endswith("\n"):
        return None
    ends = [m.end() for m in _COMPLETE.finditer(body)]
    if not ends or ends[-1] >= len(body):
        return None
    end = ends[-1]
    line = body.rfind("\n", 0, end) + 1
    if _BARE_MARKER.fullmatch(body, line, end):  # "3." of "3. Use fresh wa"
        end = line
    return end if body[:end].strip() else None


def bare_marker_from(text: str) -> int | None:
    """Where a last line that is only a list marker or heading mark ("2.", "-", "##")
    begins; None where the last line has text."""
    body = text.rstrip()
    line = body.rfind("\n") + 1
    return line if body and _BARE_MARKER.fullmatch(body, line) else None
