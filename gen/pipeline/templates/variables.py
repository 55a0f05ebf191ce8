"""What templates see: section results, the variables of a prompt or of the document, and
the static scopes (names and hints) that validation checks templates against.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gen.pipeline.sources import has_sources
from gen.pipeline.spec import Pipeline, Section
from gen.pipeline.templates.check import Scope

FANOUT_NAMES = frozenset({"item", "loop_index", "loop_length", "words_written"})
CONTEXT_NAMES = frozenset({"outline", "previous", "earlier", "sources"})
DOCUMENT_NAMES = frozenset({"title", "parts"})
RESERVED = frozenset({"inputs", "sections"}) | FANOUT_NAMES | CONTEXT_NAMES | DOCUMENT_NAMES


@dataclass(slots=True)
class SectionResult:
    """A finished section as templates see it: `.text`, `.items` (parse: list), `.title`;
    a fan-out section's `.parts` holds its instances and its `.text` joins theirs."""

    id: str
    text: str = ""
    items: list[str] = field(default_factory=list)
    title: str = ""
    parts: list[SectionResult] = field(default_factory=list)

    def __str__(self) -> str:
        return self.text

    @classmethod
    def fan_in(cls, section_id: str, parts: list[SectionResult], title: str = "") -> SectionResult:
        items = [item for part in parts for item in part.items]
        text = "\n\n".join(part.text for part in parts)
        return cls(section_id, text, items, title, list(parts))


def with_texts(
    results: Mapping[str, SectionResult], texts: Mapping[str, str]
) -> dict[str, SectionResult]:
    """The results with the texts of the instances `texts` names (by key) replaced, and the
    fan-outs that hold them joined again."""
    out: dict[str, SectionResult] = {}
    for section_id, result in results.items():
        if result.parts:
            parts = [replace(p, text=texts.get(p.id, p.text)) for p in result.parts]
            out[section_id] = SectionResult.fan_in(section_id, parts, result.title)
        else:
            out[section_id] = replace(result, text=texts.get(result.id, result.text))
    return out


class SectionMap:
    """`sections` in templates: `sections.outline` and `sections['outline']`; it has no
    methods of its own, so no section id can clash with one."""

    def __init__(self, results: Mapping[str, SectionResult]) -> None:
        self._results = dict(results)

    def __getattr__(self, name: str) -> SectionResult:
        try:
            return self._results[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, name: str) -> SectionResult:
        return self._results[name]

    def __contains__(self, name: object) -> bool:
        return name in self._results

    def __iter__(self) -> Iterator[SectionResult]:
        return iter(self._results.values())

    def __len__(self) -> int:
        return len(self._results)


def context_ids(section: Section) -> list[str]:
    return [c for c in section.context if c not in ("previous", "all")]


def foreach_items(
    pipeline: Pipeline, section: Section, results: Mapping[str, SectionResult]
) -> list[Any]:
    """The items a fan-out section runs over (its `foreach:`); [] for other sections."""
    target = section.foreach_target()
    if target is None:
        return []
    kind, name = target
    if kind == "sections":
        return list(results[name].items)
    return list(pipeline.inputs[name])


def prompt_variables(
    pipeline: Pipeline,
    section: Section,
    results: Mapping[str, SectionResult],
    *,
    item: Any = None,
    loop_index: int = 1,
    loop_length: int = 1,
    previous: str | None = None,
    written: int = 0,
) -> dict[str, Any]:
    """Variables for a section's prompt, system and title; `loop_index` is 1-based.
    `previous` defaults to the text of the section before this one in the file (empty when
    that one is already shown as `outline`); a fan-out passes its previous instance's text,
    and `written`, the words its earlier instances wrote (`words_written`: 0 in a fan-out
    whose instances run at once)."""
    values: dict[str, Any] = dict(pipeline.inputs)
    values["inputs"] = dict(pipeline.inputs)
    values["sections"] = SectionMap(results)
    if section.foreach:
        values.update(
            item=item, loop_index=loop_index, loop_length=loop_length, words_written=written
        )
    ids = context_ids(section)
    if ids:
        values["outline"] = "\n\n".join(results[i].text for i in ids if i in results)
    before = pipeline.sections[: pipeline.sections.index(section)]
    if "previous" in section.context:
        if previous is None:  # the section before, unless it is already shown as `outline`
            last = before[-1].id if before and before[-1].id not in ids else ""
            previous = results[last].text if last in results else ""
        values["previous"] = previous
    if "all" in section.context:
        shown = set(ids) | ({before[-1].id} if before and "previous" in section.context else set())
        values["earlier"] = "\n\n".join(
            results[s.id].text for s in before if s.id in results and s.id not in shown
        )
    return values


def document_variables(
    pipeline: Pipeline, results: Mapping[str, SectionResult], title: str
) -> dict[str, Any]:
    """Variables for the document template: inputs, `title`, `sections`, and `parts` (the
    finished sections in file order, fan-outs expanded, hidden ones left out)."""
    parts: list[SectionResult] = []
    for section in pipeline.sections:
        result = results.get(section.id)
        if result is not None and section.in_document:
            parts += result.parts or [result]
    values: dict[str, Any] = dict(pipeline.inputs)
    values.update(inputs=dict(pipeline.inputs), sections=SectionMap(results))
    values.update(title=title, parts=parts)
    return values


def _section_kinds(pipeline: Pipeline) -> dict[str, str]:
    return {s.id: s.parse for s in pipeline.sections}


def input_scope(pipeline: Pipeline, where: str) -> Scope:
    """Templates that only see inputs (defaults.system, document.title)."""
    hint = f"{{name!r}} is not available in {where}; it sees only the inputs"
    hints = {n: hint.format(name=n) for n in RESERVED - {"inputs"}}
    return Scope(frozenset(pipeline.inputs) | {"inputs"}, hints, _section_kinds(pipeline))


def prompt_scope(pipeline: Pipeline, section: Section) -> Scope:
    known = set(pipeline.inputs) | {"inputs", "sections"}
    hints: dict[str, str] = {}
    if section.foreach:
        known |= FANOUT_NAMES
    for name in FANOUT_NAMES - known:
        hints[name] = f"{name!r} is only defined in a fan-out section (one with foreach:)"
    wanted = {
        "outline": (bool(context_ids(section)), "a section id"),
        "previous": ("previous" in section.context, "'previous'"),
        "earlier": ("all" in section.context, "'all'"),
    }
    for name, (present, entry) in wanted.items():
        if present:
            known.add(name)
        else:
            hints[name] = f"{name!r} needs {entry} in this section's context: list"
    if has_sources(pipeline, section):
        known.add("sources")
    else:
        hints["sources"] = "'sources' needs a `sources:` list (the pipeline's or the section's)"
    for name in DOCUMENT_NAMES:
        hints[name] = f"{name!r} is only defined in the document template"
    return Scope(frozenset(known), hints, _section_kinds(pipeline), section.id)


def document_scope(pipeline: Pipeline) -> Scope:
    known = frozenset(pipeline.inputs) | {"inputs", "sections"} | DOCUMENT_NAMES
    hints = {n: f"{n!r} is only defined in section prompts" for n in FANOUT_NAMES | CONTEXT_NAMES}
    return Scope(known, hints, _section_kinds(pipeline))
