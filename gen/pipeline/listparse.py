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
    Items repeated (case, punctuation and a plural -s aside, or a twin: one word misspelt),
    and items whose title is (or is a twin of), or starts with, one of `exclude` (titles the
    pipeline writes itself), are left out."""
    marked = [m for m in map(_MARKED.match, text.splitlines()) if m]
    if marked:
        top = min(len(m.group("indent").expandtabs()) for m in marked)
        items = [m.group("item") for m in marked if len(m.group("indent").expandtabs()) == top]
    else:
        items = [line.strip() for line in text.splitlines() if line.strip()]
    skip = {_singular(title_key(e)) for e in exclude}
    out: dict[str, str] = {}
    for item in map(_clean, items):
        key = _singular(title_key(item))
        excluded = any(_twins(key, e) or key.startswith(e + " ") for e in skip)
        if item and not excluded and not any(_twins(key, seen) for seen in out):
            out[key] = item
    return list(out.values())


def title_key(title: str) -> str:
    """A title compared as words: lower case, punctuation and spacing dropped."""
    return re.sub(r"[\W_]+", " ", title.lower()).strip()


def _singular(key: str) -> str:
    """ "building lighthouses" and "building lighthouse" as one item."""
    return " ".join(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
                    for w in key.split())  # fmt: skip


def _twins(a: str, b: str) -> bool:
    """The same title but for one word written two ways ("building lighthouse" and
    "building lighthair"); "lighthouses in europe" and "lighthouses in asia" differ."""
    if a == b:
        return True
    wa, wb = a.split(), b.split()
    if len(wa) != len(wb) or len(wa) < 2:
        return False
    odd = [(x, y) for x, y in zip(wa, wb, strict=True) if x != y]
    if len(odd) != 1:
        return False
    x, y = odd[0]
    # "lighth": a word begun right, ended wrong
    short = min(len(x), len(y))
    stem = next((i for i in range(short) if x[i] != y[i]), short)
    return stem >= 5 and stem * 2 >= short


def _clean(item: str) -> str:
    match = _DECORATION.match(item)
    if match:
        item = match.group(1) or match.group(2)
    return item.strip().rstrip(":：").strip()
