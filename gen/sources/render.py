"""The block of numbered passages a prompt carries, made in one place so that the budget
counts exactly the text that is sent."""

from __future__ import annotations

from collections.abc import Sequence

from gen.sources.passages import Passage


def render(passages: Sequence[Passage]) -> str:
    """`[1] (handbook.md, "Pricing > Tiers", lines 12-18)` then the text, for each passage in
    order, numbered from 1, a blank line between them."""
    return "\n\n".join(f"[{n}] {source(p)}\n{p.text}" for n, p in enumerate(passages, start=1))


def source(passage: Passage) -> str:
    """`(handbook.md, "Pricing > Tiers", lines 12-18)`; `(notes.txt)` when nothing more is known."""
    label = passage.location.label()
    return f"({passage.path}, {label})" if label else f"({passage.path})"
