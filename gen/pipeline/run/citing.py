"""A section's source passages in a run: the ones its prompt carries, chosen by BM25 within
its budget (gen.sources.select), and, when its text is done, its markers checked, its
uncited sentences attributed where the pipeline asks, and its support measured
(gen.text.citations, attribution, support). The document's numbering and References are
made from every section's checked text at the end (document_citations)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gen.sources import Passage, Scored, render, select
from gen.text.attribution import attribute
from gen.text.citations import (
    Reference,
    check_section,
    number_document,
    references_markdown,
)
from gen.text.support import document_support, measure_section
from gen.text.words import CJK_CHAR

BUDGET_SHARE = 3  # with no sources_budget: a third of the prompt's room left
BUDGET_CAP = 2000  # tokens, with no sources_budget: past this a section is shown enough
SLACK = 16  # tokens kept between the chosen passages and the limit (the block's joins)
UNSUPPORTED_KEPT = 10  # unsupported sentences a section's record lists


@dataclass(frozen=True, slots=True)
class Shown:
    """A passage as a section's prompt numbered it (gen.text.citations.ShownPassage)."""

    id: str
    path: str
    location: str
    text: str
    sha256: str
    score: float

    @classmethod
    def of(cls, scored: Scored) -> Shown:
        p: Passage = scored.passage
        return cls(p.id, p.path, p.location.label(), p.text, p.sha256, round(scored.score, 3))

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "path": self.path,
            "location": self.location,
            "score": self.score,
            "sha256": self.sha256,
        }


def budget(asked: int | None, room: int) -> int:
    """The tokens a section's passages may take: `asked` (sources_budget) or a third of the
    prompt's room, never more than the room."""
    wanted = asked if asked is not None else min(BUDGET_CAP, room // BUDGET_SHARE)
    return max(0, min(wanted, room - SLACK))


def choose(
    passages: Sequence[Passage], query: str, tokens: int, count: Callable[[str], int]
) -> tuple[list[Shown], str]:
    """The passages shown (best first) and the numbered block the prompt carries
    (gen.sources.render: what the budget counted)."""
    if not passages or tokens <= 0:
        return [], ""
    chosen = select(passages, query, tokens, count)
    return [Shown.of(s) for s in chosen], render([s.passage for s in chosen])


@dataclass(slots=True)
class Cited:
    """A finished section's citations, for its record: its text with valid markers (its
    own numbers), and the figures."""

    text: str
    echoed: int  # lines that copied a passage's header from the prompt, removed
    citations: int  # passage references the model wrote and gen kept
    dropped: int  # markers that pointed at no passage it was shown, removed
    attributed: int  # sentences gen cited itself
    cited_sentences: int  # sentences the model cited
    supported_share: float | None  # of those, the share their passages bear out
    mean_support: float | None
    unsupported: list[str]  # sentences with a figure or name no shown passage holds

    def to_json(self) -> dict[str, Any]:
        return {
            "echoed_headers": self.echoed,
            "citations": self.citations,
            "citations_dropped": self.dropped,
            "attributed": self.attributed,
            "cited_sentences": self.cited_sentences,
            "supported_share": _round(self.supported_share),
            "mean_support": _round(self.mean_support),
            "unsupported_facts": self.unsupported[:UNSUPPORTED_KEPT],
            "unsupported_count": len(self.unsupported),
        }


def finish(text: str, shown: Sequence[Shown], mode: str) -> Cited:
    """The section's markers checked against what it was shown (mode off: all removed),
    measured, and with mode attribute, its uncited sentences given the passage that bears
    them out."""
    text, echoed = drop_echoes(text)
    checked = check_section(text, shown if mode != "off" else [])
    measured = measure_section(checked)
    final = checked.text
    added = 0
    if mode == "attribute":
        attributed = attribute(checked.text, shown)
        final, added = attributed.text, attributed.added
    unsupported = measure_section(check_section(final, shown)).unsupported_facts
    return Cited(
        text=final,
        echoed=echoed,
        citations=checked.cited,
        dropped=checked.dropped,
        attributed=added,
        cited_sentences=len(measured.sentences),
        supported_share=measured.supported_share,
        mean_support=measured.mean_support,
        unsupported=[u.sentence for u in unsupported],
    )


# a line that copies the prompt's block: a passage's header, `[2] (notes.md, page 3)`, or
# the block's own label
_ECHO = re.compile(
    r"^[ \t]*(?:\[\d+\][ \t]*\([^()\n]*\)|Sources \(after a sentence[^\n]*|资料（[^\n]*)[ \t]*$\n?",
    re.M,
)


def drop_echoes(text: str) -> tuple[str, int]:
    """The text without lines that copy the numbered block's headers (a small model writes
    the block out again), and how many there were."""
    cleaned, count = _ECHO.subn("", text)
    return (re.sub(r"\n{3,}", "\n\n", cleaned).strip() if count else text), count


def document_citations(
    sections: Sequence[tuple[str, Sequence[Shown]]],
) -> tuple[list[str], list[Reference], dict[str, Any]]:
    """Each (text, shown) section's markers made the document's numbers, the References, and
    the document's figures over the model's own citations."""
    checked = [check_section(text, shown) for text, shown in sections]
    texts, references = number_document(checked)
    support = document_support([measure_section(c) for c in checked])
    figures = {
        "references": len(references),
        "citation_markers": sum(c.cited for c in checked),
        "sentences_cited": support.cited_sentences,
    }
    return texts, references, figures


def references_block(references: Sequence[Reference], document: str) -> str:
    """The References section in the document's language."""
    cjk = len(CJK_CHAR.findall(document))
    heading = "参考文献" if cjk * 2 > len(document.split()) + cjk else "References"
    return references_markdown(references, heading)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
