"""`parse: list`: turn a section's text (a numbered or bulleted list) into its items."""

from __future__ import annotations

import re
from collections.abc import Sequence

_MARKED = re.compile(
    r"^(?P<indent>\s*)(?:\d+[.)、]\s*|[-*•+]\s+|[一二三四五六七八九十]+[、.]\s*|\(\d+\)\s*)"
    r"(?P<item>\S.*?)\s*$"
)
_DECORATION = re.compile(r"^\*\*(.*)\*\*$|^__(.*)__$")


def parse_list(text: str, exclude: Sequence[str] = ()) -> list[str]:
    """Top-level items of the first list in `text`; without list markers, its non-empty lines.
    Items repeated (case, punctuation and a plural -s aside), and items whose title is, or
    starts with, one of `exclude` (titles the pipeline writes itself), are left out."""
    marked = [m for m in map(_MARKED.match, text.splitlines()) if m]
    if marked:
        top = min(len(m.group("indent").expandtabs()) for m in marked)
        items = [m.group("item") for m in marked if len(m.group("indent").expandtabs()) == top]
    else:
        items = [line.strip() for line in text.splitlines() if line.strip()]
    skip = {title_key(e) for e in exclude}
    out: dict[str, str] = {}
    for item in map(_clean, items):
        key = title_key(item)
        excluded = any(key == e or key.startswith(e + " ") for e in skip)
        if item and not excluded and _singular(key) not in out:
            out[_singular(key)] = item
    return list(out.values())


def title_key(title: str) -> str:
    """A title compared as words: lower case, punctuation and spacing dropped."""
    return re.sub(r"[\W_]+", " ", title.lower()).strip()


def _singular(key: str) -> str:
    """ "building lighthouses" and "building lighthouse" as one item."""
    return " ".join(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
                    for w in key.split())  # fmt: skip


def _clean(item: str) -> str:
    match = _DECORATION.match(item)
    if match:
        item = match.group(1) or match.group(2)
    return item.strip().rstrip(":：").strip()
