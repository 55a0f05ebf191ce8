"""A section's paragraphs, read once each as the text grows: a paragraph in capitals is cut
("shout"), one that opens with a heading the text has had already starts the text over
("restart"), and one that opens as a conclusion when the text has concluded already, or
may not conclude here, ends it there ("conclusion"). Knows nothing of backends or
requests."""

from __future__ import annotations

import re

from gen.pipeline.run.repetition import Repetition
from gen.text.conclusion import concludes, shouting
from gen.text.listparse import title_key
from gen.text.words import count_words

# a paragraph is judged once it has this many words (its opener and a sentence's worth), or
# when it ends
PARAGRAPH_WORDS = 12
# a paragraph's first line as a heading: "### 研究现状", or a line all in bold
_HEADING = re.compile(r"#{1,6}[ \t]+([^\n]+)|\*\*([^*\n]+)\*\*[ \t]*(?:\n|$)")
_NUMBERED = re.compile(r"^\s*(?:\d+(?:\.\d+)*[.)、]?|[一二三四五六七八九十]+[、.．])\s*")
DETAIL_CHARS = 60


class Paragraphs:
    """Feed it the text as it stands (`check`); it judges each paragraph once."""

    def __init__(self) -> None:
        # a paragraph may open as the text's conclusion: once (False: not here, where a
        # planned section's later point or a later section concludes it)
        self.may_conclude = True
        self.concluded: int | None = None  # where the paragraph that concluded it begins
        self._next = 0  # where the paragraph not yet judged begins
        self._judged = False  # it was judged before it ended
        self._headings: set[str] = set()  # the headings of the paragraphs judged, as keys

    def reread(self, text: str) -> None:
        """The text was cut back: its paragraphs are read again as they stand, nothing
        judged."""
        self._next, self._judged = 0, False
        self.concluded = None
        self._headings = set()
        self.check(text, len(text), judge=False)

    def check(self, text: str, shown: int, judge: bool = True) -> Repetition | None:
        """The first cut the paragraphs not yet judged call for, each judged once it has
        PARAGRAPH_WORDS words or ends; text before `shown` is never cut. `judge` False:
        the pipeline's text, read (for its conclusion and headings), never cut."""
        while True:
            end = text.find("\n\n", self._next)
            begin, body = self._next, text[self._next : end if end >= 0 else None]
            if end < 0 and (self._judged or count_words(body) < PARAGRAPH_WORDS):
                return None
            found = None if self._judged else self._cut(begin, body, shown, judge)
            if end < 0:
                self._judged = True
            else:
                self._next, self._judged = end + 2, False
            if found is not None:
                return found

    def _cut(self, begin: int, body: str, shown: int, judge: bool) -> Repetition | None:
        """The cut one paragraph calls for, or None."""
        said = body.strip()
        if not said:
            return None
        start = begin + body.index(said[0])
        cuts = judge and start >= shown
        opening = said[:DETAIL_CHARS]
        if cuts and shouting(said):
            return Repetition("shout", start, start, f"a paragraph in capitals: {opening}")
        if concludes(said):
            if self.concluded is None and (self.may_conclude or not judge):
                self.concluded = start
            elif cuts:
                why = (
                    "concluded again"
                    if self.concluded is not None
                    else "a conclusion before its end"
                )
                return Repetition("conclusion", start, start, f"{why}: {opening}")
        heading = _HEADING.match(said)
        if heading is not None:
            key = title_key(_NUMBERED.sub("", heading.group(1) or heading.group(2)))
            if cuts and key and key in self._headings:
                line = said.splitlines()[0][:DETAIL_CHARS]
                return Repetition(
                    "restart", start, start, f"starts over at a heading it had: {line}"
                )
            self._headings.add(key)
        return None
