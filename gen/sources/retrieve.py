"""Which passages a section is shown: BM25 (bm25s, over gen.sources.tokens' terms) ranks them
against the section's query; the best are taken while the rendered block fits a token
budget. Deterministic: ties go to the earlier passage. An index is built once per set of
passages and kept in memory, keyed by their hashes."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import bm25s

from gen.sources.passages import Passage
from gen.sources.render import render
from gen.sources.tokens import terms

INDEXES_KEPT = 8  # sets of passages whose index stays in memory (a batch's records, sections)
# tokens by which a block may count fewer than its passages alone (a tokenizer merges across
# the joins); past it a passage is not tried against the whole block
JOIN_SLACK = 8
_INDEXES: OrderedDict[str, bm25s.BM25 | None] = OrderedDict()


@dataclass(frozen=True, slots=True)
class Scored:
    passage: Passage
    score: float  # BM25, > 0
    order: int  # the passage's place in the list ranked from


def rank(passages: Sequence[Passage], query: str) -> list[Scored]:
    """Every passage that shares a term with the query, best first, ties by order."""
    words = list(dict.fromkeys(terms(query)))  # a word said twice in the query weighs once
    index = _index(passages) if words else None
    if index is None:
        return []
    scores = index.get_scores(words)  # (len(passages),)
    order = sorted(range(len(passages)), key=lambda i: (-scores[i], i))  # ties: earlier first
    return [Scored(passages[i], float(scores[i]), i) for i in order if scores[i] > 0]


def select(
    passages: Sequence[Passage],
    query: str,
    budget_tokens: int,
    count_tokens: Callable[[str], int],
) -> list[Scored]:
    """The best-ranked passages whose rendered block (gen.sources.render) counts at most
    budget_tokens; one too long for what is left is passed over for the next."""
    chosen: list[Scored] = []
    used = 0  # tokens of the block rendered from chosen
    for scored in rank(passages, query):
        alone = count_tokens(render([scored.passage]))
        if used + alone > budget_tokens + JOIN_SLACK:
            continue  # cannot fit: the whole counts about the sum of its parts
        total = count_tokens(render([*(s.passage for s in chosen), scored.passage]))
        if total <= budget_tokens:
            chosen.append(scored)
            used = total
    return chosen


def _index(passages: Sequence[Passage]) -> bm25s.BM25 | None:
    """The passages' index; None when not one of them has a term to match."""
    key = hashlib.sha256("\n".join(p.sha256 for p in passages).encode()).hexdigest()
    if key in _INDEXES:
        _INDEXES.move_to_end(key)
        return _INDEXES[key]
    corpus = [terms(" ".join([*p.location.heading, p.text])) for p in passages]  # its headings too
    index = None
    if any(corpus):
        index = bm25s.BM25()
        index.index(corpus, show_progress=False)
    _INDEXES[key] = index
    while len(_INDEXES) > INDEXES_KEPT:
        _INDEXES.popitem(last=False)
    return index
