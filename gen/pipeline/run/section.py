"""One section's rounds: render and fit the prompt, open a request, stream the round into
the Draft (which cuts a loop, a refused list item, a sibling's title or the length policy's
end), record it, then do what rounds.next_round decides: stop, decode on in the same
sequence (kv), or close the stream and send a new request, to retry what was cut or to
continue (prefix / chat / more).

Works against the Backend protocol; the orchestrator decides what runs when.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from gen.backends.base import Backend, Delta, Message, Stream
from gen.backends.collect import collect
from gen.engine.detokenizer import REPLACEMENT
from gen.errors import ContextOverflowError
from gen.pipeline.length import (
    DEFAULT_ROUNDS,
    LengthPlan,
    after_run,
    measure_rate,
    plan_section,
    text_room,
)
from gen.pipeline.run.budget import Fitted, fit_prompt
from gen.pipeline.run.citing import Shown, budget, choose, finish
from gen.pipeline.run.constraint import (
    Hold,
    ListItems,
    hold_for,
    item_range,
    parse_items,
)
from gen.pipeline.run.continuation import (
    CONTINUE_PROMPT,
    MORE_PROMPT,
    LengthPolicy,
    RoundMode,
    remove_overlap,
)
from gen.pipeline.run.draft import Draft
from gen.pipeline.run.events import EventLog
from gen.pipeline.run.headings import HeadingFilter
from gen.pipeline.run.manifest import SectionRecord
from gen.pipeline.run.params import EXTEND_MIN_TOKENS, retry_bias, sampling
from gen.pipeline.run.points import (
    PLAN_TOKENS,
    Plan,
    parse_points,
    plan_request,
    point_count,
    wants_plan,
)
from gen.pipeline.run.reader import own_prompt, section_reader
from gen.pipeline.run.relevance import Relevance, judge_for
from gen.pipeline.run.repetition import ENDING_CUTS, READER_CUTS, Repetition
from gen.pipeline.run.roundlog import request_entry, round_event, round_record
from gen.pipeline.run.rounds import (
    CUTS,
    Continue,
    Cut,
    Outcome,
    Resume,
    Retry,
    Rounds,
    Rules,
    Stop,
    budget_stop,
    next_round,
    round_tokens,
)
from gen.pipeline.run.siblings import Siblings
from gen.pipeline.sources import section_query
from gen.pipeline.spec import GenerationSettings, Pipeline, Section
from gen.pipeline.templates.render import render_prompt, render_system
from gen.sampling import Constraint, SamplingParams
from gen.sources import Passage
from gen.text.listparse import item_title
from gen.text.quality import measure
from gen.text.words import count_words, length_score

# a sentence cut for saying an earlier section again is named in the next rounds' prompt
COVERED_NOTE = "Already covered earlier in the document, so do not repeat it:"
COVERED_SHOWN = 3


@dataclass(slots=True)
class RunContext:
    pipeline: Pipeline
    backend: Backend
    events: EventLog
    window: int
    reserve: int

    @property
    def limit(self) -> int:
        return self.window - self.reserve


def strategy_for(settings: GenerationSettings, backend: Backend) -> RoundMode:
    """The configured continuation; `kv` needs a backend that keeps state, else `chat`."""
    if settings.continuation == "kv" and not backend.supports_kv:
        return "chat"
    return settings.continuation


class SectionRun:
    def __init__(
        self,
        ctx: RunContext,
        section: Section,
        record: SectionRecord,
        variables: dict[str, Any],
        *,
        seed: int | None = None,
        siblings: tuple[str, ...] = (),
        lengths: tuple[int | None, int | None, int | None] | None = None,
        earlier: Sequence[str] = (),
        concluded_later: bool = False,
    ) -> None:
        """`siblings`: the other items' titles of a fan-out (a line that is one of them, or
        a marker and one of them, ends the part there); `lengths`: the instance's (target,
        min, max) words when the section's are templates; `earlier`: the text of the
        sections before it in the document (a sentence that says theirs again is cut);
        `concluded_later`: a later section of the document is its conclusion (a paragraph
        that concludes ends this one there)."""
        self.ctx = ctx
        self.section = section
        self.rec = record
        self.variables = variables
        self.settings = ctx.pipeline.settings_for(section)
        self.strategy = strategy_for(self.settings, ctx.backend)
        self.seed = seed
        self.siblings = Siblings(siblings)
        self.lengths = lengths or (None, None, None)
        target, least, most = self.lengths
        self.target = target
        self.policy = LengthPolicy(target, least, most)
        self.system = render_system(ctx.pipeline, section, variables)
        headings = HeadingFilter(section.headings, record.title)
        self.draft = Draft(ctx.events, record.key, self.policy, headings, self.siblings, earlier)
        self.draft.paragraphs.may_conclude = not concluded_later
        self.state = Rounds()  # the round loop's counters
        self._params = SamplingParams()  # what the current round samples with
        # where the text stood when the current request, one asked to write on past the
        # model's end, was sent (None: the request is no such)
        self._asked: int | None = None
        self.requests: list[dict[str, Any]] = []  # per round what was sent: prompts/<key>.json
        self._items = item_range(ctx.pipeline, section, variables)  # a list's (min, max)
        self.hold: Hold | None = hold_for(section, self._items, ctx.backend)
        self.judge: Relevance | None = None  # a prose section's drift check
        self.length: LengthPlan | None = None  # made with the first prompt
        library = ctx.pipeline._library
        self.library: list[Passage] = library.passages_for(section.id) if library else []
        self.shown: list[Shown] = []  # the passages its prompt numbers, [1] first
        self.plan: Plan | None = None  # written from a plan of points (points.py)
        self._point_opens = False  # the next round opens a new point
        self._dropped = False  # a conclusion was dropped to write on before it
        self._asked_again = False  # the current point, come out thin, was asked for again
        if not self.shaped and section.parse != "json":  # a shape's grammar decides its lines
            prompt = own_prompt(ctx.pipeline, section, variables)
            reader = section_reader(prompt, self.system, variables, self.settings.language)
            self.draft.reader = reader
            self.judge = judge_for(ctx.backend, prompt, self.system, reader.wanted)
        self.rules = Rules(  # what the loop's decisions read of the settings
            strategy=self.strategy,
            max_rounds=self.settings.max_rounds or DEFAULT_ROUNDS,  # planned in first_prompt
            loop_retries=self.settings.loop_retries,
            max_tokens=self.settings.max_tokens,
            window=ctx.window,
            targeted=target is not None,
            shaped=self.shaped,
        )

    @property
    def text(self) -> str:
        return self.draft.text

    # -- constraints ----------------------------------------------------------------

    @property
    def constrained(self) -> bool:
        """Held to a schema, regex or grammar: a `format:`, or a list or JSON outline on a
        backend that can hold it."""
        return self.hold is not None

    @property
    def shaped(self) -> bool:
        """Is the output held to a shape whose end the grammar decides (a list, JSON, a
        schema)? Prose is held too, but may be written on past its end."""
        return self.constrained and self.section.format != "prose"

    def _constraint(self) -> Constraint | None:
        """What this round's output is held to; it reads the text already written first."""
        if self.hold is None:
            return None
        if self.hold.source is not None:
            return Constraint(self.hold.kind, self.hold.source, self.text)
        if self.draft.list is None:  # a list: its items are checked as they stream
            pipeline, section, variables = self.ctx.pipeline, self.section, self.variables
            self.draft.list = ListItems.of(pipeline, section, variables, self._items)
        return Constraint(self.hold.kind, self.draft.list.grammar(), self.text)

    def describe_constraint(self) -> dict[str, Any] | None:
        """What the output is held to, for the resume hash."""
        return None if self.hold is None else self.hold.described

    def items(self) -> list[Any]:
        """A list or JSON section's items (at most `max_items`), repeats and the titles the
        pipeline writes itself left out."""
        return parse_items(self.ctx.pipeline, self.section, self.text, self._items)

    # -- prompt ---------------------------------------------------------------------

    def build(self, variables: dict[str, Any], mode: RoundMode = "initial") -> list[Message]:
        messages: list[Message] = []
        if self.system:
            messages.append({"role": "system", "content": self.system})
        user = render_prompt(self.ctx.pipeline, self.section, variables)
        if self.plan is not None:  # the plan, and the point to write now
            user = self.plan.request(user, self.text)
        if self.draft.covered:  # after an echo was cut: name what the document already says
            said = "\n".join(f"- {c}" for c in self.draft.covered[-COVERED_SHOWN:])
            user += f"\n\n{COVERED_NOTE}\n{said}"
        messages.append({"role": "user", "content": user})
        if mode == "prefix":
            messages.append({"role": "assistant", "content": self.text})
        elif mode in ("chat", "more"):
            messages.append({"role": "assistant", "content": self.text})
            messages.append(
                {"role": "user", "content": CONTINUE_PROMPT if mode == "chat" else MORE_PROMPT}
            )
        return messages

    def fit(self, mode: RoundMode = "initial") -> Fitted:
        return fit_prompt(
            lambda v: self.build(v, mode),
            self.variables,
            self.ctx.backend.count_tokens,
            self.ctx.limit,
            f"section {self.rec.key!r}",
        )

    def first_prompt(self) -> Fitted:
        """The fitted first-round prompt (also what the resume hash is computed from, so a
        section shown other passages is written again); the section's rounds are planned
        from it and its target (gen/pipeline/length.py)."""
        fitted = self.fit()
        if self.library:
            self._choose_passages(fitted.prompt_tokens)
            fitted = self.fit()
        ctx, max_tokens = self.ctx, self.settings.max_tokens
        prompt = "\n".join(m["content"] for m in fitted.messages if m["role"] == "user")
        window = text_room(ctx.window, fitted.prompt_tokens, self.strategy, ctx.reserve, max_tokens)
        rate = partial(measure_rate, count_text=ctx.backend.count_text)
        self.length = plan_section(self.settings, self.lengths, prompt, rate, window)
        self.rules = replace(self.rules, max_rounds=self.length.rounds)
        self.rec.length_plan = self.length.to_json()
        return fitted

    # -- a plan of points -----------------------------------------------------------

    def _planned(self) -> bool:
        """Is the section written from a plan of points? Prose with a target whose tokens
        are more than one answer holds (or `plan: true`)."""
        prose = not self.shaped and self.section.parse == "text" and self.draft.reader is not None
        tokens = self.length.tokens if self.length is not None and self.target else None
        return wants_plan(self.settings.plan, tokens, prose)

    async def _make_plan(self, first: Fitted) -> Fitted:
        """Ask for the plan's points (a request of its own, kept out of the text); the
        first round's prompt carries them and the first point. No plan parsed: the section
        is written as one answer, as it would be without one."""
        if self.target is None or self.length is None or self.length.tokens is None:
            return first
        reader = self.draft.reader
        chinese = reader is not None and reader.wanted == "cjk"
        count = point_count(self.length.tokens)
        *head, ask = first.messages
        asked: Message = {"role": "user", "content": plan_request(ask["content"], count, chinese)}
        params = sampling(self.settings, PLAN_TOKENS * count, seed=self.seed)
        reply = await collect(await self.ctx.backend.chat([*head, asked], params))
        most = self.policy.max_words
        plan = Plan(parse_points(reply.text, count), self.target, most, chinese)
        plan.prompt_tokens, plan.completion_tokens = reply.prompt_tokens, reply.completion_tokens
        self.rec.plan = plan.to_json()
        if not plan.points:
            return first
        self.plan = plan
        self.draft.policy = plan.begin(0)
        self.draft.paragraphs.may_conclude = plan.last
        self._point_opens = True
        return self.fit()

    def _steer(self, step: Stop | Resume | Retry | Continue) -> Stop | Resume | Retry | Continue:
        """A step as the plan of points, or the text's conclusion, has it. A section short
        of its target that already concluded (the model stopped, or concluded again) is
        not pushed on past its conclusion: the conclusion, where not shown yet, goes and
        the text is written on from before it, once; else the section ends there."""
        if self.plan is not None:
            return self._next_point(step)
        start = self.draft.paragraphs.concluded
        pushed = isinstance(step, Continue) and self.state.extend
        last = self.rec.rounds[-1].stop_reason if self.rec.rounds else None
        again = isinstance(step, Stop) and last == "conclusion" and self.policy.short(self.text)
        if start is None or not (pushed or again):
            return step
        if self._dropped or start < self.draft.shown:
            self.state = replace(self.state, extend=False)
            return Stop("finished") if pushed else step
        self._dropped = True
        self.draft.cut_back(start)
        self.state = replace(self.state, extend=True)
        mode: RoundMode = "prefix" if self.strategy in ("kv", "prefix") else "more"
        return Retry(mode, last=self.state.spent >= self.rules.budget)  # what it held goes

    def _next_point(
        self, step: Stop | Resume | Retry | Continue
    ) -> Stop | Resume | Retry | Continue:
        """A planned section whose point ended (at its share, or where the model ended it)
        goes on with the next point in a new request; one whose model stopped short is
        not pushed to write on (it would conclude again): the next point gives it new
        material, and after the last the section ends."""
        plan = self.plan
        if plan is None:
            return step
        ended = isinstance(step, Stop) and step.why in ("end", "finished")
        pushed = isinstance(step, Continue) and self.state.extend
        if not (ended or pushed):
            return step
        self.state = replace(self.state, extend=False)
        mode: RoundMode = "initial"  # a new answer: the request quotes the text's end
        spent = self.state.spent >= self.rules.budget
        at_end = isinstance(step, Stop) and step.why == "end"
        if not at_end and not self._asked_again and plan.thin(self.text):
            # the point came out thin (cut, or ended at once): it is asked for once more
            self._asked_again = self._point_opens = True
            return Continue(mode, last=spent)
        self._asked_again = False
        if not plan.advance():
            return Stop("finished") if pushed else step
        self.draft.policy = plan.begin(count_words(self.text))
        self.draft.paragraphs.may_conclude = plan.last
        self.rec.plan = plan.to_json()
        self._point_opens = True
        if isinstance(step, Stop) and step.why == "end":
            return Retry(mode, last=spent)  # what ran past the point's end was cut: it goes
        return Continue(mode, last=spent)

    def _choose_passages(self, prompt_tokens: int) -> None:
        """The passages that best match the section (its title, prompt and item), as many
        as its budget holds in the room the prompt leaves."""
        ctx, section = self.ctx, self.section
        asked = section.sources_budget or ctx.pipeline.context.sources_budget
        tokens = budget(asked, ctx.limit - prompt_tokens)
        item = self.variables.get("item")
        own = own_prompt(ctx.pipeline, section, self.variables)
        query = section_query([self.rec.title, item_title(item) if item else "", own])
        self.shown, self.variables["sources"] = choose(
            self.library, query, tokens, ctx.backend.count_text
        )

    # -- rounds ---------------------------------------------------------------------

    async def run(self, first: Fitted) -> None:
        draft = self.draft
        fitted = first
        if self._planned():
            fitted = await self._make_plan(first)
        mode: RoundMode = "initial"
        stream = await self._open(fitted, mode)
        try:
            while True:
                started = time.monotonic()
                final, cut = await self._consume(stream, mode)
                self._round(final, fitted, mode, started, cut)
                self.state, step = next_round(self.state, self._outcome(final, cut), self.rules)
                step = self._steer(step)
                if isinstance(step, Stop):
                    self._stop(step)
                    break  # stop: step.why (each is labelled in rounds.py)
                if isinstance(step, Resume):  # kv: the same sequence decodes on
                    mode, fitted = "kv", Fitted([], step.carried, 0)
                    self._params = replace(self._params, max_tokens=step.tokens)
                    await stream.resume(step.tokens)
                    continue
                if isinstance(step, Retry) and step.yielded is not None:
                    draft.allow(step.yielded)
                    saw = self.rec.rounds[-1].repetition or {}
                    self.rec.yields.append({"kind": step.yielded, "detail": saw.get("detail", "")})
                tail = await stream.close()  # a cut round's tail is part of what was cut
                if isinstance(step, Continue):
                    draft.append(tail)
                if step.last:
                    break  # stop: rounds used up (after a finished or a trimmed round)
                mode = step.mode
                cut_off = self.rec.rounds[-1].finish_reason == "length"
                opens = self.state.extend or self._point_opens
                if opens and draft.text and not draft.text.endswith("\n"):
                    draft.append("\n\n")
                try:
                    fitted = self.fit(mode)
                    spent = budget_stop(fitted.prompt_tokens, self.ctx.window, cut_off)
                except ContextOverflowError:  # the text so far no longer fits the budget
                    spent = budget_stop(None, self.ctx.window, cut_off)
                if spent is not None:
                    self._stop(spent)
                    break
                if mode == "more" and draft.text and not draft.text.endswith("\n"):
                    draft.append("\n\n")
                stream = await self._open(fitted, mode)
        finally:
            tail = await stream.close()
            last = self.rec.rounds[-1] if self.rec.rounds else None
            ended = (
                "target_words",
                "repetition",
                *READER_CUTS,
                *ENDING_CUTS,
                *self.siblings.titles.values(),
            )
            if last is not None and last.stop_reason in ended:
                tail = ""  # text the engine held back lies past where the section was cut
            cut_off = last is not None and last.finish_reason == "length"
            if cut_off:
                tail = tail.rstrip(REPLACEMENT)  # half a character at the cut is not text
            draft.finish(tail, cut_off=cut_off and last is not None and last.stop_reason is None)
        self.rec.text = draft.text
        self.rec.unfinished = draft.unfinished
        self.rec.words = count_words(draft.text)
        self.rec.target_words = self.target
        if self.target:
            self.rec.length_score = length_score(self.target, max(self.rec.words, 1))
        if self.length is not None:  # a target cut off short says why
            used = -(-self.state.spent // self.rules.max_tokens)  # the budget's rounds spent
            wrote = sum(r.completion_tokens for r in self.rec.rounds)
            self.length = after_run(self.length, self.rec.words, self.rec.truncated, used, wrote)
            self.rec.length_plan = self.length.to_json()
        quality = measure(draft.text)
        self.rec.distinct_4 = quality.distinct_4
        self.rec.repeated_sentences = quality.repeated_share
        if draft.reader is not None:
            draft.reader.record(self.rec, draft.text)
        if self.judge is not None:
            self.judge.record(self.rec, draft.text)
        if self.library:
            self.rec.shown = self.shown
            cited = finish(draft.text, self.shown, self.ctx.pipeline.citations)
            self.rec.text = cited.text
            self.rec.citing = cited.to_json()

    def _outcome(self, final: Delta | None, cut: str | Repetition | None) -> Outcome:
        """What the round just streamed did, for next_round."""
        kind: Cut | None = None
        if isinstance(cut, Repetition):
            kind = CUTS.get(cut.kind, "loop")
        elif cut is not None:
            kind = "end"  # the length policy's end, or a sibling's title
        text = self.text
        tokens = 0  # what the round wrote counts against the budget; a cut one is recounted
        if final is not None:
            length = final.finish_reason == "length"
            tokens = self._params.max_tokens if length else final.completion_tokens
        return Outcome(
            rounds=len(self.rec.rounds),
            end=len(text),
            tokens=tokens,
            kept=self.ctx.backend.count_text(text) if kind not in (None, "end") else 0,
            shown=self.draft.shown,
            progress=count_words(text[self.state.retry_mark :]),
            cut=kind,
            leaned=cut.words if isinstance(cut, Repetition) else (),
            kind=cut.kind if isinstance(cut, Repetition) else None,
            refusals=self.draft.list.tries if self.draft.list is not None else 0,
            finish=final.finish_reason if final else "stop",
            used=final.prompt_tokens + final.completion_tokens if final else None,
            wrote=any(c.isalnum() for c in text[self.draft.round_start :]),
            idle=self._asked is not None and not any(c.isalnum() for c in text[self._asked :]),
            short=lambda end: self.policy.short(text[:end]),
        )

    def _stop(self, step: Stop) -> None:
        """Apply a stop to the text and the section's record."""
        if step.keep is not None:
            self.draft.text = self.draft.text[: step.keep]
        if step.degenerate:
            self.rec.degenerate = True
            if step.why not in self.rec.reasons:
                self.rec.reasons.append(step.why)
        if step.truncated is not None:
            self.rec.truncated = step.truncated
        if self.rec.truncated and "truncated" not in self.rec.reasons:
            self.rec.reasons.append("truncated")
        if step.ended_by is not None:
            self.rec.ended_by = step.ended_by

    async def _open(self, fitted: Fitted, mode: RoundMode) -> Stream:
        room = self.ctx.window - fitted.prompt_tokens
        own = fitted.messages[-1]["content"] if mode == "prefix" else ""
        params = sampling(
            self.settings,
            round_tokens(self.state, self.rules, room),
            seed=self.seed,
            retry=self.state.retries,
            strength=self.state.stuck if self.state.strong else 0,
            bias=retry_bias(self.state, self.ctx.backend.word_ids),
            least=EXTEND_MIN_TOKENS if self.state.extend else 0,
            constraint=self._constraint(),
            warm=self.draft.list.warmth() if self.draft.list is not None else 0.0,
            own_tokens=self.ctx.backend.count_text(own) if own else 0,
        )
        self._params = params
        self._asked = len(self.text) if mode == "more" or self.state.extend else None
        return await self.ctx.backend.chat(
            fitted.messages,
            params,
            hold=self.strategy == "kv",
            continue_final=mode == "prefix",
        )

    async def _consume(
        self, stream: Stream, mode: RoundMode
    ) -> tuple[Delta | None, str | Repetition | None]:
        """Stream one round into the text; returns its final delta and why it was cut
        ("words", a sibling's title, or the Repetition found)."""
        round_no = len(self.rec.rounds) + 1
        draft = self.draft
        # every new request is a new answer, whose opening may be chatter ("Sure! Here is the
        # rest:", "I hope you like this article."): a kv round goes on with the same one
        restart = mode in ("chat", "more") or self.state.extend or self._point_opens
        self._point_opens = False
        draft.begin(round_no, restart=restart, answer=mode != "kv")
        dedupe = mode in ("chat", "more")
        base = draft.text
        pending = ""  # chat rounds: text held until it can no longer be a repeat of `base`
        final: Delta | None = None
        async for d in stream.deltas():
            piece = d.text
            if dedupe and piece:
                pending += piece
                if pending.lstrip() and pending.lstrip() in base and d.finish_reason is None:
                    continue  # still possibly repeating what was written: wait
                piece, pending, dedupe = remove_overlap(base, pending), "", False
            if d.finish_reason is not None:
                final = d
            cut = draft.take(piece, round_no)
            if cut is None and self.judge is not None:
                cut = await self.judge.check(draft, final=d.finish_reason == "stop")
            if cut is not None:
                return (d if d.finish_reason else None), cut
        if pending:
            cut = draft.take(remove_overlap(base, pending), round_no)
            if cut is not None:
                return final, cut
        # a kv round cut off by max_tokens decodes on in the same stream: its last line is
        # not whole yet (if the section goes on otherwise, Draft.append decides it)
        goes_on = self.strategy == "kv" and final is not None and final.finish_reason == "length"
        answered = final is not None and final.finish_reason == "stop"
        return final, draft.end_round(round_no, goes_on, answered=answered)

    def _round(
        self,
        final: Delta | None,
        fitted: Fitted,
        mode: RoundMode,
        started: float,
        cut: str | Repetition | None,
    ) -> None:
        """Record the round: in the section's record, its requests, and an event."""
        round_text = self.text[self.draft.round_start :]
        record = round_record(
            final,
            fitted,
            mode,
            time.monotonic() - started,
            cut,
            self.state.retries,
            lambda: self.ctx.backend.count_text(round_text),
        )
        round_no = len(self.rec.rounds) + 1
        self.requests.append(request_entry(round_no, record, fitted, self._params))
        fields = round_event(record, count_words(self.text))
        self.ctx.events.emit("round_finished", section=self.rec.key, round=round_no, **fields)
        self.rec.rounds.append(record)
