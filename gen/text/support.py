"""How far a section's cited sentences are borne out by the passages they cite, measured
on the text alone (no model, so the figure is cheap, deterministic and the same for every
backend).

The measure. A cited sentence's content terms are its words less stopwords, stemmed
("trams" = "tram", "opened" = "open"), its numbers ("1,200" = "1200", "twelve" = "12"), and
for Chinese or Japanese its character bigrams cut at particles ("上海的电车": 上海, 电车). Its
`support` is the share of those terms that occur anywhere in the passages it cites (all
markers in the sentence together). It is `supported` when support >= SUPPORTED (0.5) and
every figure it states occurs in a cited passage.

Why these. A sentence that restates a passage keeps the passage's nouns, names and figures
and changes the rest (connectives, word order, verb forms, framing such as "notably"), so
content-word overlap rewards paraphrase and stemming absorbs the inflections; n-grams
longer than one would punish exactly the rewording a good report does. At 0.5 most of what
the sentence says is found in what it cites: faithful paraphrases score 0.6-1.0, while a
sentence that cites a passage on the same subject for a claim the passage does not make
shares only the topic's words (0.1-0.4; see tests/text/test_support.py). Figures are held
apart because one changed number leaves the overlap high ("every 7 minutes" against
"every 5 minutes" shares 3 of 4 terms) yet makes the claim false.

Facts without a source: apart from citations, every sentence whose figure or capitalised
name (not its first word) occurs in none of the passages the section was shown is listed,
cited or not: these are what a reader cannot check.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from gen.text.citations import SectionCitations
from gen.text.claims import claim, sentence_at, sentence_spans, stem, terms

SUPPORTED = 0.5  # a cited sentence is supported from this share of its terms on
_SPACE_BEFORE_STOP = re.compile(r"\s+([.,;:!?。，；：！？])")


@dataclass(frozen=True, slots=True)
class CitedSentence:
    text: str  # the sentence without its markers
    passages: tuple[str, ...]  # the ids it cites
    support: float  # share of its content terms found in those passages, 0-1
    missing: tuple[str, ...]  # its figures that none of those passages holds

    @property
    def supported(self) -> bool:
        return self.support >= SUPPORTED and not self.missing


@dataclass(frozen=True, slots=True)
class UnsupportedFact:
    sentence: str  # without its markers
    facts: tuple[str, ...]  # figures and names no passage shown to the section holds


@dataclass(frozen=True, slots=True)
class SectionSupport:
    citations: int  # passage references kept (`[1, 3]` counts two)
    dropped: int  # markers or numbers removed: they pointed at no passage shown
    sentences: tuple[CitedSentence, ...]  # the cited sentences with content terms
    unsupported_facts: tuple[UnsupportedFact, ...]

    @property
    def supported(self) -> int:
        return sum(s.supported for s in self.sentences)

    @property
    def supported_share(self) -> float | None:
        """Supported cited sentences over cited sentences; None when none is cited."""
        return self.supported / len(self.sentences) if self.sentences else None

    @property
    def mean_support(self) -> float | None:
        if not self.sentences:
            return None
        return sum(s.support for s in self.sentences) / len(self.sentences)


@dataclass(frozen=True, slots=True)
class DocumentSupport:
    citations: int
    dropped: int
    cited_sentences: int
    supported: int
    supported_share: float | None  # over every cited sentence of the document
    mean_support: float | None
    unsupported_facts: int  # sentences listed across the sections


def measure_section(section: SectionCitations) -> SectionSupport:
    """Support for every cited sentence of a checked section, and its unsupported facts."""
    spans = sentence_spans(section.text)
    found = {p.id: terms(p.text) for p in section.shown}
    everywhere = frozenset().union(*found.values())
    cited: dict[tuple[int, int], dict[str, None]] = {}
    for citation in section.citations:
        where = sentence_at(spans, citation.start)
        if where is not None:
            cited.setdefault(where, {}).update(dict.fromkeys(citation.passages))
    sentences: list[CitedSentence] = []
    unsupported: list[UnsupportedFact] = []
    for span in spans:
        if section.text.startswith("#", span[0]):
            continue  # a heading names a part; it claims nothing
        said = _without_markers(section, span)
        said_claim = claim(said)
        if span in cited and said_claim.terms:
            ids = tuple(cited[span])
            source = frozenset().union(*(found[i] for i in ids))
            share = len(said_claim.terms & source) / len(said_claim.terms)
            missing = tuple(n for n in said_claim.numbers if n.lower() not in source)
            sentences.append(CitedSentence(said, ids, share, missing))
        facts = [n for n in said_claim.numbers if n.lower() not in everywhere]
        facts += [n for n in said_claim.names if stem(n) not in everywhere]
        if facts:
            unsupported.append(UnsupportedFact(said, tuple(facts)))
    return SectionSupport(section.cited, section.dropped, tuple(sentences), tuple(unsupported))


def document_support(sections: Sequence[SectionSupport]) -> DocumentSupport:
    """The sections' figures together; shares are over all cited sentences, not a mean of
    the sections' shares, so a section with one citation weighs what one citation weighs."""
    sentences = [s for section in sections for s in section.sentences]
    supported = sum(s.supported for s in sentences)
    return DocumentSupport(
        citations=sum(s.citations for s in sections),
        dropped=sum(s.dropped for s in sections),
        cited_sentences=len(sentences),
        supported=supported,
        supported_share=supported / len(sentences) if sentences else None,
        mean_support=sum(s.support for s in sentences) / len(sentences) if sentences else None,
        unsupported_facts=sum(len(s.unsupported_facts) for s in sections),
    )


def _without_markers(section: SectionCitations, span: tuple[int, int]) -> str:
    """The sentence at span with its citation markers cut out, spaces closed up."""
    text, (start, end) = section.text, span
    pieces, at = [], start
    for c in section.citations:
        if start <= c.start < end:
            pieces.append(text[at : c.start])
            at = c.end
    pieces.append(text[at:end])
    return _SPACE_BEFORE_STOP.sub(r"\1", " ".join("".join(pieces).split()))
