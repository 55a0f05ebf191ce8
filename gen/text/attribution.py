"""Citations gen adds itself: after a sentence the model left without a marker, the number of
the shown passage that bears it out by gen.text.support's measure (its content terms found
there at least SUPPORTED, and every figure it states). A small model rarely writes markers;
a reader still wants to know which passage a sentence rests on. These are counted apart from
the model's own, since they are supported by construction and say nothing of the model."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from gen.text.citations import ShownPassage, find_markers
from gen.text.claims import claim, sentence_spans, terms
from gen.text.support import SUPPORTED

MIN_TERMS = 4  # content terms a sentence needs to be attributed at all
MIN_TELLING = 2  # of its terms found in the passage, those not in every shown passage
# where a marker goes: before the sentence's closing stop (and any closing quote or bracket)
_TAIL = re.compile(r"[.!?。！？…]*[\"'”’)\]」』）]*$")


@dataclass(frozen=True, slots=True)
class Attributed:
    text: str  # with the added markers, in the section's own numbers
    added: int  # sentences given a marker


def attribute(text: str, shown: Sequence[ShownPassage]) -> Attributed:
    """`text` (already checked: every marker in it valid) with `[k]` added to each sentence
    without a marker that shown[k - 1] supports best, where that passage supports it."""
    if not shown:
        return Attributed(text, 0)
    found = [terms(p.text) for p in shown]
    # what every passage says (the subject's own name, most often): no sign of which one
    common = frozenset.intersection(*found) if len(found) > 1 else frozenset()
    marked = [m.start for m in find_markers(text, len(shown))]
    edits: list[tuple[int, str]] = []
    for start, end in sentence_spans(text):
        if text.startswith(("#", "|"), start) or any(start <= m < end for m in marked):
            continue  # a heading or table row claims nothing; a cited sentence is the model's
        if text[start:end].rstrip().endswith((":", "：")):
            continue  # a lead-in to what follows
        said = claim(text[start:end])
        if len(said.terms) < MIN_TERMS:
            continue  # too little to be borne out by anything
        best, share = -1, 0.0
        for k, passage in enumerate(found):
            shared = said.terms & passage
            here = len(shared) / len(said.terms)
            missing = any(n.lower() not in passage for n in said.numbers)
            telling = len(shared - common) >= MIN_TELLING
            if here > share and telling and not missing:
                best, share = k, here
        if best >= 0 and share >= SUPPORTED:
            tail = _TAIL.search(text, start, end)
            at = tail.start() if tail else end
            edits.append((at, f" [{best + 1}]"))
    out, last = [], 0
    for at, marker in edits:
        out += [text[last:at], marker]
        last = at
    out.append(text[last:])
    return Attributed("".join(out), len(edits))
