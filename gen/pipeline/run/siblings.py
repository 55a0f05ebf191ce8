"""A fan-out part's siblings: a line that is another part's title, alone or after a marker
("## ", "2. ", "Part 2: "), ends the part there."""

from __future__ import annotations

import re
from collections.abc import Iterable

from gen.pipeline.run.lines import finished_lines
from gen.text.function_words import DETERMINERS
from gen.text.listparse import title_key

# what may open a heading line before a title: "## ", "2. ", "**", "Part 2: "
_LINE_MARKER = re.compile(
    r"[ \t]*(?:#{1,6}[ \t]*|\d+[.)][ \t]*|[-*+•][ \t]+|\*\*|__|"
    r"(?:part|chapter|section)[ \t]*\d*[ \t]*[:.)-]?[ \t]*)+",
    re.I,
)


def sibling_key(title: str) -> str:
    """A title as a part's line is compared with its siblings': as words, a leading "the"
    or "a" aside ("2. Construction of bridges" is "The construction of bridges")."""
    words = title_key(title).split()
    while words[:1] and words[0] in DETERMINERS:
        words = words[1:]
    return " ".join(words)


class Siblings:
    """The other parts' titles, and where the next line to check for one starts."""

    def __init__(self, titles: Iterable[str]) -> None:
        self.titles = {sibling_key(t): t for t in titles if sibling_key(t)}
        self._scan = 0

    def line(self, text: str, final: bool = False) -> tuple[int, str] | None:
        """(where its line starts, the title) for the first line since the last call that
        is a sibling's heading: the title alone, or after a marker ("## ", "2. ", "Part 2:")
        with anything after it; with `final`, the unfinished last line too."""
        if not self.titles:
            return None
        if self._scan > len(text):  # the text was cut back: start at its last line
            self._scan = text.rfind("\n") + 1
        for start, end in finished_lines(text, self._scan, final):
            self._scan = end + 1
            line = text[start:end]
            marker = _LINE_MARKER.match(line)
            rest = sibling_key(line[marker.end() :] if marker else line)
            if rest in self.titles:
                return start, self.titles[rest]
            if marker and marker.group().strip():
                title = next((t for t in self.titles if rest.startswith(t + " ")), None)
                if title is not None:
                    return start, self.titles[title]
        return None


def plan_start(text: str, start: int) -> int:
    """Where the list lines just before `start` begin (a part that began a sibling's title
    early was writing the plan: those lines go with it)."""
    while start > 0:
        line = text.rfind("\n", 0, start - 1) + 1
        marker = _LINE_MARKER.match(text, line, start)
        if not (marker and marker.group().strip()) and text[line:start].strip():
            break
        start = line
    return start
