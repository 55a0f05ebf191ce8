"""`gen run --dry-run`: every section's first prompt as the model would get it, fitted to
the budget, with its token count, seed, what was trimmed and its length plan (its rounds,
and why a target cannot be reached); nothing is generated.

Text that only a model could write (an earlier section, the items of an outline) is shown
as a placeholder, so prompts that read it are shorter here than in a run; a fan-out over
the items a model writes is planned once, for one placeholder item."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from gen.backends.base import Backend, Message
from gen.pipeline.length import LengthPlan
from gen.pipeline.run.events import EventLog
from gen.pipeline.run.manifest import SectionRecord
from gen.pipeline.run.orchestrator import derive_seed, sibling_titles
from gen.pipeline.run.runner import context_window
from gen.pipeline.run.section import RunContext, SectionRun
from gen.pipeline.spec import Pipeline, Section
from gen.pipeline.templates.render import render_lengths, render_title
from gen.pipeline.templates.trial import placeholder, placeholder_item
from gen.pipeline.templates.variables import SectionResult, foreach_items, prompt_variables


class PlanBackend(Backend, Protocol):
    def render(self, messages: list[Message], continue_final: bool = False) -> str: ...


@dataclass(slots=True)
class PlannedPrompt:
    key: str  # the section key a run uses: the id, or <id>-<n> in a fan-out
    title: str
    messages: list[Message]
    rendered: str  # the messages as the model gets them (its chat template applied)
    prompt_tokens: int
    trimmed_tokens: int
    trimmed: dict[str, int]  # context variable -> characters cut to fit the budget
    seed: int | None
    max_tokens: int
    target_words: int | None = None
    placeholders: list[str] = field(default_factory=list)  # the model-written text it shows
    length: LengthPlan | None = None  # its rounds, and whether its target is reachable
    passages: list[dict[str, Any]] = field(default_factory=list)  # the sources it is shown

    def to_json(self) -> dict[str, Any]:
        return {
            "section": self.key,
            "title": self.title,
            "messages": self.messages,
            "rendered": self.rendered,
            "prompt_tokens": self.prompt_tokens,
            "trimmed_tokens": self.trimmed_tokens,
            "trimmed_characters": self.trimmed,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "target_words": self.target_words,
            "placeholders": self.placeholders,
            "length_plan": None if self.length is None else self.length.to_json(),
            "passages": self.passages,
        }


def plan_prompts(pipeline: Pipeline, backend: PlanBackend) -> list[PlannedPrompt]:
    """The first-round prompt of every section and fan-out instance, in file order."""
    window = context_window(pipeline, backend)
    ctx = RunContext(pipeline, backend, EventLog("dry-run"), window, pipeline.context.reserve)
    results: dict[str, SectionResult] = {}
    plans: list[PlannedPrompt] = []
    for section in pipeline.sections:
        instances = _instances(pipeline, section, results)
        parts: list[SectionResult] = []
        previous: str | None = None
        written = 0  # the words of the instances before, as if each met its target
        for key, item, index, count, stops in instances:
            variables = prompt_variables(
                pipeline, section, results, item=item, loop_index=index, loop_length=count,
                previous=previous, written=written if previous else 0,
            )  # fmt: skip
            plan = _plan(ctx, section, key, variables, stops)
            written += plan.target_words or 0
            stand_ins = [*(r.text for r in results.values()), *([previous] if previous else [])]
            stand_ins += [i for r in results.values() for i in r.items]
            plan.placeholders = [t for t in dict.fromkeys(stand_ins) if t in plan.rendered]
            plans.append(plan)
            parts.append(SectionResult(key, placeholder(key), title=plan.title))
            previous = placeholder(key) if section.foreach else None
        if section.foreach:
            results[section.id] = SectionResult.fan_in(section.id, parts)
        else:
            items = [placeholder_item(section.id)] if section.parse else []
            results[section.id] = SectionResult(
                section.id, placeholder(section.id), items, parts[0].title
            )
    return plans


Instance = tuple[str, Any, int, int, tuple[str, ...]]


def _instances(
    pipeline: Pipeline, section: Section, results: dict[str, SectionResult]
) -> list[Instance]:
    """(key, item, loop_index, loop_length, stops) per instance; a fan-out over a model's
    list runs over its one placeholder item."""
    if not section.foreach:
        return [(section.id, None, 1, 1, ())]
    items = foreach_items(pipeline, section, results)
    n = len(items)
    return [(f"{section.id}-{i}", it, i, n, sibling_titles(items, i))
            for i, it in enumerate(items, 1)]  # fmt: skip


def _plan(
    ctx: RunContext,
    section: Section,
    key: str,
    variables: dict[str, Any],
    stops: tuple[str, ...],
) -> PlannedPrompt:
    pipeline = ctx.pipeline
    title = render_title(pipeline, section, variables)
    settings = pipeline.settings_for(section)
    seed = derive_seed(settings.seed, key)
    lengths = render_lengths(pipeline, section, variables)
    run = SectionRun(
        ctx, section, SectionRecord(key, section.id, title), variables,
        seed=seed, siblings=stops, lengths=lengths,
    )  # fmt: skip
    fitted = run.first_prompt()
    backend: PlanBackend = ctx.backend  # type: ignore[assignment]
    room = ctx.window - fitted.prompt_tokens
    return PlannedPrompt(
        key=key,
        title=title,
        messages=fitted.messages,
        rendered=backend.render(fitted.messages),
        prompt_tokens=fitted.prompt_tokens,
        trimmed_tokens=fitted.trimmed_tokens,
        trimmed=dict(fitted.trimmed),
        seed=seed,
        max_tokens=max(1, min(settings.max_tokens, room)),
        target_words=lengths[0],
        length=run.length,
        passages=[p.to_json() for p in run.shown],
    )
