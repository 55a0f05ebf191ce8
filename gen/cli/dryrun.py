"""`gen run --dry-run`: print every planned prompt; load the tokenizer, not the model."""

from __future__ import annotations

import json
import sys
from typing import IO

from gen.pipeline.length import LengthPlan
from gen.pipeline.run.dryrun import PlannedPrompt, plan_prompts
from gen.pipeline.spec import Pipeline


def dry_run(pipeline: Pipeline, model: str, as_json: bool, out: IO[str] | None = None) -> int:
    out = out or sys.stdout  # looked up now: a default would keep the stdout of import time
    from gen.backends.tokens import open_tokenizer

    backend = open_tokenizer(model)
    plans = plan_prompts(pipeline, backend)
    if as_json:
        for plan in plans:
            out.write(json.dumps(plan.to_json(), ensure_ascii=False) + "\n")
        return 0
    print(
        f"# dry run of {pipeline.name} with {model} ({backend.name}); nothing is generated",
        file=out,
    )
    for plan in plans:
        write_plan(plan, out)
    return 0


def write_plan(plan: PlannedPrompt, out: IO[str]) -> None:
    trimmed = f", trimmed {plan.trimmed_tokens} tokens" if plan.trimmed_tokens else ""
    target = f", target {plan.target_words} words" if plan.target_words else ""
    print(f"\n=== {plan.key}: {plan.title} ===", file=out)
    print(
        f"# {plan.prompt_tokens} prompt tokens{trimmed}, max_tokens {plan.max_tokens}, "
        f"seed {plan.seed}{target}",
        file=out,
    )
    if plan.length is not None:
        print(f"# {length_line(plan.length)}", file=out)
        warning = plan.length.warning(f"sections.{plan.key}")
        if warning:
            print(f"# warning: {warning}", file=out)
    for n, passage in enumerate(plan.passages, start=1):
        where = f", {passage['location']}" if passage["location"] else ""
        print(f"# source [{n}] {passage['path']}{where} (score {passage['score']})", file=out)
    for text in plan.placeholders:
        print(f"# stands in for what the model writes: {text}", file=out)
    out.write(plan.rendered if plan.rendered.endswith("\n") else plan.rendered + "\n")


def length_line(plan: LengthPlan) -> str:
    """The section's rounds and where they come from."""
    if plan.rounds_from == "default":
        return f"{plan.rounds} rounds (no length target)"
    head = f"{plan.rounds} rounds"
    if plan.rounds_from == "max_rounds":
        head += " (max_rounds)"
    if plan.rate is None:
        return head
    room = f"; the window leaves the text {plan.room} tokens" if plan.room is not None else ""
    return (
        f"{head} for {plan.words} words, about {plan.tokens} tokens at {plan.rate.describe()}{room}"
    )
