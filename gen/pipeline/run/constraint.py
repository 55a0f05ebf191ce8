"""What a section's output is held to: its `format:` (prose, a JSON schema, a regex, a
grammar), or, for a list or JSON outline on a backend that can hold it, the list's grammar
or the outline's schema. A held list's items are checked as they stream (ListItems): a
refused one is cut away, sampled again warmer, and banned from then on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gen.backends.base import Backend
from gen.pipeline.run.outline import ItemGuard, Refusal, json_list_schema, list_grammar, tidy_title
from gen.pipeline.run.prose import PROSE_REGEX
from gen.pipeline.spec import Pipeline, Section
from gen.pipeline.templates.render import document_title, render_count, render_prompt
from gen.text.listparse import item_title, parse_json_items, parse_list, title_key

# a list item refused this many times in a row is then only refused as a repeat (or as a
# title the pipeline writes itself); twice as many end the list with the items it has
ITEM_RETRIES = 4
# a refused item is sampled again at least this warm, warmer with each refusal up to a cap
ITEM_TEMPERATURE, ITEM_WARMING, ITEM_HOTTEST = 0.5, 0.1, 0.7
# the most items a list without `max_items` is held to
MAX_LIST_ITEMS = 30


def item_range(
    pipeline: Pipeline, section: Section, variables: dict[str, Any]
) -> tuple[int, int] | None:
    """(min, max) items of a list or JSON outline; None for text."""
    if section.parse == "text":
        return None
    most = render_count(pipeline, section, "max_items", variables)
    least = render_count(pipeline, section, "min_items", variables)
    most = most or max(least or 1, MAX_LIST_ITEMS)
    least = min(least or most, most)
    return least, most


@dataclass(frozen=True, slots=True)
class Hold:
    """What the output is held to: as the resume hash reads it, and the kind and text of
    the Constraint a round samples with (no text: a list's grammar, made anew each round
    from the items so far)."""

    described: dict[str, Any]
    kind: str
    source: str | None = None


def hold_for(section: Section, items: tuple[int, int] | None, backend: Backend) -> Hold | None:
    """The section's Hold: a `format:`, or a list or JSON outline (`items`: its range) on a
    backend that can hold it; None when the output is free."""
    fmt = section.format
    if fmt == "none":
        return None
    if fmt == "prose":  # a guard, not a contract: not asked of a remote server
        return Hold({"format": "prose"}, "regex", PROSE_REGEX) if backend.supports_grammar else None
    if fmt is not None:
        kind, source = fmt.kind_and_text()
        return Hold(fmt.model_dump(mode="json", exclude_none=True), kind, source)
    if items is None or not backend.supports_grammar:
        return None
    described = {"parse": section.parse, "items": items, "exclude": list(section.exclude)}
    if section.parse == "json":
        return Hold(described, "json_schema", json_list_schema(*items))
    return Hold(described, "lark")


@dataclass(slots=True)
class ListItems:
    """A held list as it streams: its guard's check of each item, the items refused so far
    (the grammar bans them), and the refusals in a row without a new item between them."""

    items: tuple[int, int]  # (min, max)
    exclude: list[str]  # titles the pipeline writes itself
    guard: ItemGuard
    refused: list[str] = field(default_factory=list)
    tries: int = 0
    seen: int = 0  # items the guard had accepted at the last refusal

    @classmethod
    def of(
        cls,
        pipeline: Pipeline,
        section: Section,
        variables: dict[str, Any],
        items: tuple[int, int] | None,
    ) -> ListItems:
        """A list section's, `items` its range, before its first round."""
        prompt = render_prompt(pipeline, section, variables)
        exclude = list(section.exclude)
        guard = ItemGuard(prompt, exclude, title=document_title(pipeline))
        return cls(items or (1, MAX_LIST_ITEMS), exclude, guard)

    def grammar(self) -> str:
        least, most = self.items
        return list_grammar(
            least,
            most,
            exclude=self.exclude,
            refused=self.refused,
            fresh_from=len(self.guard.items) + 1,
        )

    def refuse(self, refusal: Refusal) -> None:
        """Count a refusal; past ITEM_RETRIES in a row only repeats are refused."""
        accepted = len(self.guard.items)
        if accepted > self.seen:
            self.tries = 0  # items were accepted since the last refusal
        self.seen = accepted
        self.tries += 1
        self.guard.lenient = self.tries >= ITEM_RETRIES
        self.refused.append(refusal.title)

    def warmth(self) -> float:
        """The least temperature a refused item is sampled again with."""
        if not self.tries:
            return 0.0
        return min(ITEM_HOTTEST, ITEM_TEMPERATURE + ITEM_WARMING * (self.tries - 1))


def parse_items(
    pipeline: Pipeline, section: Section, text: str, items: tuple[int, int] | None
) -> list[Any]:
    """A list or JSON section's items (at most its max), repeats and the titles the
    pipeline writes itself left out."""
    most = items[1] if items else None
    exclude = list(section.exclude)
    if section.parse == "json":
        found = parse_json_items(text, exclude)
    else:
        found = parse_list(text, exclude)
    title = title_key(document_title(pipeline))
    found = [tidy_title(i) if isinstance(i, str) else i for i in found]
    return [i for i in found if title_key(item_title(i)) != title][:most]
