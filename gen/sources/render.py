"""The block of numbered passages a prompt carries, made in one place so that the budget
counts exactly the text that is sent."""

from __future__ import annotations

import re
from collections.abc import Sequence

from gen.sources.passages import Passage
from gen.text.words import CJK_CHAR


def render(passages: Sequence[Passage]) -> str:
    """`[1] (handbook.md, "Pricing > Tiers", lines 12-18)` then the text, for each passage in
    order, numbered from 1, a blank line between them."""
    return "\n\n".join(
        f"[{n}] {source(p)}\n{unwrap(p.text)}" for n, p in enumerate(passages, start=1)
    )


# a line that starts a block of its own (a list item, heading, quote or table row)
_BLOCK = re.compile(r"[ \t]*(?:[-*+•#>|]|\d{1,3}[.)][ \t])")


def unwrap(text: str) -> str:
    """A passage's paragraphs on one line each, as prose is written (a model shown wrapped
    lines writes wrapped lines); lists, headings and tables keep their lines, and Chinese
    or Japanese lines join without a space."""
    out: list[str] = []
    for line in text.split("\n"):
        last = out[-1] if out else ""
        joins = (
            line.strip()
            and last.strip()
            and not _BLOCK.match(line)
            and not last.lstrip().startswith(("#", "|"))
        )
        if not joins:
            out.append(line)
            continue
        last, line = last.rstrip(), line.strip()
        cjk = CJK_CHAR.match(last[-1]) and CJK_CHAR.match(line[0])
        out[-1] = last + ("" if cjk else " ") + line
    return "\n".join(out)


def source(passage: Passage) -> str:
    """`(handbook.md, "Pricing > Tiers", lines 12-18)`; `(notes.txt)` when nothing more is known."""
    label = passage.location.label()
    return f"({passage.path}, {label})" if label else f"({passage.path})"
