"""The lines of a text that grows as it streams, read once each: the caller keeps where the
next one starts."""

from __future__ import annotations

from collections.abc import Iterator


def finished_lines(text: str, at: int, final: bool = False) -> Iterator[tuple[int, int]]:
    """(start, end) of each line of `text` from `at` on that a newline ends; with `final`,
    the unfinished last line too."""
    while True:
        end = text.find("\n", at)
        if end < 0:
            if not final or at >= len(text):
                return
            end = len(text)
        yield at, end
        at = end + 1
