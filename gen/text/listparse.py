"""`parse: list`: turn a section's text (a numbered or bulleted list) into its items."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from gen.errors import GenError

_MARKED = re.compile(
    r"^(?P<indent>\s*)(?:\d+[.)、]\s*|[-*•+]\s+|[一二三四五六七八九十]+[、.]\s*|\(\d+\)\s*)"
    r"(?P<item>\S.*?)\s*$"
)
_DECORATION = re.compile(r"^\*\*(.*)\*\*$|^__(.*)__$")
# an item's own number said again at its end ("How bicycles work: 1"), after a colon or a
# dash or in brackets ("Part 1" is a title, not an echo)
_NUMBER_ECHO = re.compile(r"(?:\s*[:：\-–—]\s*|\s*[(（])(\d+)[)）]?\s*$")


def parse_list(text: str, exclude: Sequence[str] = ()) -> list[str]:
    """Top-level items of the first list in `text`; without list markers, its non-empty lines;
    an item's own number said again at its end is dropped where every item has one. Items
    repeated (case, punctuation and a plural -s aside, or a twin: one word misspelt),
    and items whose title is (or is a twin of), or starts with, one of `exclude` (titles the
    pipeline writes itself), are left out."""
    marked = [m for m in map(_MARKED.match, text.splitlines()) if m]
    if marked:
        top = min(len(m.group("indent").expandtabs()) for m in marked)
        items = [m.group("item") for m in marked if len(m.group("indent").expandtabs()) == top]
    else:
        items = [line.strip() for line in text.splitlines() if line.strip()]
    return _distinct(_without_own_numbers([item for item in map(_clean, items) if item]), exclude)


def _without_own_numbers(items: list[str]) -> list[str]:
    """The items less their own numbers where every one of them (two or more) ends in its
    position in the list ("Tides: 1", "Storms: 2"): the model numbered the list twice."""
    found = [_NUMBER_ECHO.search(item) for item in items]
    own = [m is not None and int(m.group(1)) == n for n, m in enumerate(found, 1)]
    if len(items) < 2 or not all(own):
        return items
    return [item[: m.start()] if m else item for item, m in zip(items, found, strict=True)]


def parse_json_items(text: str, exclude: Sequence[str] = ()) -> list[Any]:
    """`parse: json`: the items of the JSON array in `text` (or of the one array an object
    holds), each a title or an object with a `title`; repeats and excluded titles left out."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise GenError(f"parse: json: the output is not JSON ({exc}): {text[:80]!r}") from None
    if isinstance(value, dict):
        arrays = [v for v in value.values() if isinstance(v, list)]
        value = arrays[0] if len(arrays) == 1 else value
    if not isinstance(value, list):
        raise GenError(f"parse: json: the output is not a list of items: {text[:80]!r}")
    return _distinct([v for v in value if item_title(v)], exclude)


def item_title(item: Any) -> str:
    """A fan-out item's title: the item itself, or an object's `title` (or `name`)."""
    if isinstance(item, dict):
        item = item.get("title", item.get("name", ""))
    return str(item).strip() if isinstance(item, str | int | float) else ""


def _distinct(items: list[Any], exclude: Sequence[str]) -> list[Any]:
    skip = {singular(title_key(e)) for e in exclude}
    out: dict[str, Any] = {}
    for item in items:
        key = singular(title_key(item_title(item)))
        excluded = any(is_twin(key, e) or key.startswith(e + " ") for e in skip)
        if key and not excluded and not any(is_twin(key, seen) for seen in out):
            out[key] = item
    return list(out.values())


def line_item(line: str) -> str | None:
    """The item of one list line ("2. Title", "- Title"), cleaned; None for other lines."""
    match = _MARKED.match(line)
    return _clean(match.group("item")) if match else None


def title_key(title: str) -> str:
    """A title compared as words: lower case, punctuation and spacing dropped."""
    return re.sub(r"[\W_]+", " ", title.lower()).strip()


def singular(key: str) -> str:
    """ "building lighthouses" and "building lighthouse" as one item (and "processes" and
    "process")."""
    return " ".join(map(_singular_word, key.split()))


def _singular_word(word: str) -> str:
    if len(word) <= 3 or not word.endswith("s") or word.endswith("ss"):
        return word
    if word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    if word.endswith("ies"):  # "batteries" and "battery"
        return word[:-3] + "y"
    return word[:-1]


def is_twin(a: str, b: str) -> bool:
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
