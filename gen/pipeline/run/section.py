"""One section's rounds: render and fit the prompt, stream a round, continue while the
round was cut off (kv / prefix / chat) or the text is short of its target, and stop a
round that loops, trim it back to its last sound sentence and try again.

Works against the Backend protocol; the orchestrator decides what runs when.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from gen.backends.base import Backend, Delta, Message, Stream
from gen.engine.detokenizer import REPLACEMENT
from gen.errors import ContextOverflowError
from gen.pipeline.run.budget import Fitted, fit_prompt
from gen.pipeline.run.constraint import (
    MAX_LIST_ITEMS,
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
from gen.pipeline.run.events import EventLog
from gen.pipeline.run.headings import HeadingFilter
from gen.pipeline.run.manifest import RoundRecord, SectionRecord
from gen.pipeline.run.outline import ItemGuard, Refusal
from gen.pipeline.run.release import release_end, round_pieces
from gen.pipeline.run.repetition import ECHO_N, LoopDetector, Repetition
from gen.pipeline.run.rounds import (
    RETRY_TOKENS,
    Continue,
    Cut,
    Outcome,
    Resume,
    Rounds,
    Rules,
    Stop,
    budget_stop,
    next_round,
)
from gen.pipeline.run.siblings import Siblings, plan_start
from gen.pipeline.spec import GenerationSettings, Pipeline, Section
from gen.pipeline.templates.render import document_title, render_prompt, render_system
from gen.sampling import Constraint, SamplingParams, build_sampling_params
from gen.text.function_words import FUNCTION_WORDS
from gen.text.listparse import title_key
from gen.text.quality import measure, ngrams, tokens
from gen.text.words import count_words, length_score

# a retry makes the word a refrain leans on this much less likely (a logit bias)
RETRY_BIAS = -6.0
# a section that stopped short writes on past its end for at least this many tokens
EXTEND_MIN_TOKENS = 64
# a sentence cut for saying an earlier section again is named in the next rounds' prompt
COVERED_NOTE = "Already covered earlier in the document, so do not repeat it:"
COVERED_SHOWN, COVERED_CHARS = 3, 300


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


def sampling(
    settings: GenerationSettings,
    max_tokens: int,
    *,
    seed: int | None = None,
    stop: tuple[str, ...] = (),
    retry: int = 0,
    strength: int = 0,
    bias: tuple[tuple[int, float], ...] = (),
    least: int = 0,
    constraint: Constraint | None = None,
    warm: float = 0.0,
) -> SamplingParams:
    """The round's SamplingParams; the n-th retry after a loop samples with seed + n, and
    with DRY 1.5**strength times stronger (strength: retries in a row without progress);
    `warm`: the least temperature (a refused list item is sampled again)."""
    dry, temperature = settings.dry_multiplier, max(settings.temperature, warm)
    if retry:
        seed = None if seed is None else seed + retry
    if strength:  # (a frequency penalty would soon ban "." and "the" from a long text)
        dry = max(dry, 0.8) * 1.5**strength
        if temperature:
            temperature = max(temperature, min(1.0, temperature + 0.15 * strength))
    return build_sampling_params(
        settings,
        max_tokens=max_tokens,
        temperature=temperature,
        dry_multiplier=dry,
        logit_bias=bias,
        seed=seed,
        stop=(*settings.stop, *stop),
        min_tokens=min(max(settings.min_tokens, least), max_tokens),
        constraint=constraint,
    )


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
    ) -> None:
        """`siblings`: the other items' titles of a fan-out (a line that is one of them, or
        a marker and one of them, ends the part there); `lengths`: the instance's (target,
        min, max) words when the section's are templates; `earlier`: the text of the
        sections before it in the document (a sentence that says theirs again is cut)."""
        self.ctx = ctx
        self.section = section
        self.rec = record
        self.variables = variables
        self.settings = ctx.pipeline.settings_for(section)
        self.strategy = strategy_for(self.settings, ctx.backend)
        self.seed = seed
        self.siblings = Siblings(siblings)
        target, least, most = lengths or (None, None, None)
        self.target = target
        self.policy = LengthPolicy(target, least, most)
        self.system = render_system(ctx.pipeline, section, variables)
        self.headings = HeadingFilter(section.headings, record.title)
        self.text = ""
        self.shown = 0  # characters of self.text already sent as deltas
        self.state = Rounds()  # the round loop's counters
        self._params = SamplingParams()  # what the current round samples with
        self.requests: list[dict[str, Any]] = []  # per round what was sent: prompts/<key>.json
        self._round_start = 0  # where the current round's text begins in self.text
        self._round_starts: list[tuple[int, int]] = []  # (where, round): who wrote the text
        self._detector = LoopDetector()
        self._earlier = frozenset(ngrams(tokens("\n\n".join(earlier)), ECHO_N))
        self._covered: list[str] = []  # sentences cut for saying an earlier section again
        self._items = item_range(ctx.pipeline, section, variables)  # a list's (min, max)
        self.hold: Hold | None = hold_for(section, self._items, ctx.backend)
        self._list: ListItems | None = None  # a held list's items as they stream

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
        if self._list is None:
            user = render_prompt(self.ctx.pipeline, self.section, self.variables)
            exclude = list(self.section.exclude)
            guard = ItemGuard(user, exclude, title=document_title(self.ctx.pipeline))
            self._list = ListItems(self._items or (1, MAX_LIST_ITEMS), exclude, guard)
        return Constraint(self.hold.kind, self._list.grammar(), self.text)

    def describe_constraint(self) -> dict[str, Any] | None:
        """What the output is held to, for the resume hash."""
        return None if self.hold is None else self.hold.described

    def items(self) -> list[Any]:
        """A list or JSON section's items (at most `max_items`), repeats and the titles the
        pipeline writes itself left out."""
        return parse_items(self.ctx.pipeline, self.section, self.text, self._items)

    def _refuse(self, refusal: Refusal) -> Repetition:
        """A list item repeats an earlier one (or is one the pipeline writes itself): it is
        cut away and sampled again, the grammar banning it from now on."""
        if self._list is not None:
            self._list.refuse(refusal)
        self.text = self.text[: max(len(self.text[: refusal.start].rstrip()), self.shown)]
        detail = f"item {refusal.title!r} refused: {refusal.reason}"
        return Repetition("item", refusal.start, len(self.text), detail)

    # -- prompt ---------------------------------------------------------------------

    def build(self, variables: dict[str, Any], mode: RoundMode = "initial") -> list[Message]:
        messages: list[Message] = []
        if self.system:
            messages.append({"role": "system", "content": self.system})
        user = render_prompt(self.ctx.pipeline, self.section, variables)
        if self._covered:  # after an echo was cut: name what the document already says
            said = "\n".join(f"- {c}" for c in self._covered[-COVERED_SHOWN:])
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
        """The fitted first-round prompt (also what the resume hash is computed from)."""
        return self.fit()

    # -- rounds ---------------------------------------------------------------------

    async def run(self, first: Fitted) -> None:
        fitted = first
        mode: RoundMode = "initial"
        stream = await self._open(fitted, mode)
        try:
            while True:
                started = time.monotonic()
                final, cut = await self._consume(stream, mode)
                self.rec.rounds.append(self._round(final, fitted, mode, started, cut))
                self.state, step = next_round(self.state, self._outcome(final, cut), self._rules)
                if isinstance(step, Stop):
                    self._stop(step)
                    break
                if isinstance(step, Resume):  # kv: the same sequence decodes on
                    mode, fitted = "kv", Fitted([], step.carried, 0)
                    self._params = replace(self._params, max_tokens=step.tokens)
                    await stream.resume(step.tokens)
                    continue
                tail = await stream.close()  # a cut round's tail is part of what was cut
                if isinstance(step, Continue):
                    self._append(tail)
                if step.last:
                    break  # stop: rounds used up (after a finished or a trimmed round)
                mode = step.mode
                cut_off = self.rec.rounds[-1].finish_reason == "length"
                if self.state.extend and self.text and not self.text.endswith("\n"):
                    self._append("\n\n")
                try:
                    fitted = self.fit(mode)
                    spent = budget_stop(fitted.prompt_tokens, self.ctx.window, cut_off)
                except ContextOverflowError:  # the text so far no longer fits the budget
                    spent = budget_stop(None, self.ctx.window, cut_off)
                if spent is not None:
                    self._stop(spent)
                    break
                if mode == "more" and self.text and not self.text.endswith("\n"):
                    self._append("\n\n")
                stream = await self._open(fitted, mode)
        finally:
            tail = await stream.close()
            last = self.rec.rounds[-1] if self.rec.rounds else None
            ended = ("target_words", "repetition", *self.siblings.titles.values())
            if last is not None and last.stop_reason in ended:
                tail = ""  # text the engine held back lies past where the section was cut
            if last is not None and last.finish_reason == "length":
                tail = tail.rstrip(REPLACEMENT)  # half a character at the cut is not text
            self.text += self.headings.feed(tail) + self.headings.flush()
            self._finish_text()
        self.rec.text = self.text
        self.rec.words = count_words(self.text)
        self.rec.target_words = self.target
        if self.target:
            self.rec.length_score = length_score(self.target, max(self.rec.words, 1))
        quality = measure(self.text)
        self.rec.distinct_4 = quality.distinct_4
        self.rec.repeated_sentences = quality.repeated_share

    @property
    def _rules(self) -> Rules:
        return Rules(
            strategy=self.strategy,
            max_rounds=self.settings.max_rounds,
            loop_retries=self.settings.loop_retries,
            max_tokens=self.settings.max_tokens,
            window=self.ctx.window,
            targeted=self.policy.target is not None,
            shaped=self.shaped,
        )

    def _outcome(self, final: Delta | None, cut: str | Repetition | None) -> Outcome:
        """What the round just streamed did, for next_round."""
        kind: Cut | None = None
        if isinstance(cut, Repetition):
            kind = "item" if cut.kind == "item" else "loop"
        elif cut is not None:
            kind = "end"  # the length policy's end, or a sibling's title
        text = self.text
        return Outcome(
            rounds=len(self.rec.rounds),
            end=len(text),
            shown=self.shown,
            progress=count_words(text[self.state.retry_mark :]),
            cut=kind,
            leaned=cut.words if isinstance(cut, Repetition) else (),
            refusals=self._list.tries if self._list is not None else 0,
            finish=final.finish_reason if final else "stop",
            used=final.prompt_tokens + final.completion_tokens if final else None,
            wrote=any(c.isalnum() for c in text[self._round_start :]),
            short=lambda end: self.policy.short(text[:end]),
        )

    def _stop(self, step: Stop) -> None:
        """Apply a stop to the text and the section's record."""
        if step.keep is not None:
            self.text = self.text[: step.keep]
        if step.degenerate:
            self.rec.degenerate = True
        if step.truncated is not None:
            self.rec.truncated = step.truncated
        if step.ended_by is not None:
            self.rec.ended_by = step.ended_by

    def _request(self, record: RoundRecord, fitted: Fitted, mode: RoundMode) -> dict[str, Any]:
        """What one round sent: the messages (a kv round sends none: it decodes on in the
        same sequence), the sampling settings with the seed, and the tokens."""
        sampling_json = asdict(self._params)
        for name in ("stop", "stop_token_ids", "dry_sequence_breakers"):
            sampling_json[name] = list(sampling_json[name])
        entry: dict[str, Any] = {
            "round": len(self.rec.rounds) + 1,
            "strategy": mode,
            "messages": fitted.messages if mode != "kv" else None,
            "continue_final_message": mode == "prefix",
            "sampling": sampling_json,
            "prompt_tokens": record.prompt_tokens,
            "cached_prompt_tokens": record.cached_prompt_tokens,
            "completion_tokens": record.completion_tokens,
            "trimmed_tokens": record.trimmed_tokens,
            "trimmed_characters": dict(fitted.trimmed),
            "finish_reason": record.finish_reason,
            "stop_reason": record.stop_reason,
        }
        return entry

    def _bias(self) -> tuple[tuple[int, float], ...]:
        """A retry makes the words its loops leaned on less likely (while it is stuck)."""
        if not self.state.stuck:
            return ()
        ids = {i for word in self.state.avoid for i in self.ctx.backend.word_ids(word)}
        return tuple((i, RETRY_BIAS) for i in sorted(ids))

    def _at_sibling(self, start: int, title: str, round_no: int) -> str | Repetition:
        """The part has begun a sibling's title at `start`: it ends there (the title is the
        round's stop reason); before half its target it has gone astray (writing the plan,
        or the next part) and is retried from there like a loop."""
        target = self.policy.target
        early = bool(target) and count_words(self.text[:start]) < (target or 0) / 2
        if early:  # the list lines just before it were the plan too: they go with it
            start = plan_start(self.text, start)
        self.text = self.text[: max(start, self.shown)]
        if early:
            words = tuple(w for w in title_key(title).split() if w not in FUNCTION_WORDS)
            detail = f"began another part's title early: {title}"
            return Repetition("sibling", len(self.text), len(self.text), detail, words[:1])
        self._release(final=True, round_no=round_no)
        return title

    def _finish_text(self) -> None:
        """The end of the section: a last line that is a sibling's title is dropped, and
        everything still held back is shown."""
        found = self.siblings.line(self.text, final=True)
        if found is not None:
            self.text = self.text[: max(found[0], self.shown)]
        self.text = self.text[: max(self.shown, len(self.text.rstrip()))]
        self._release(final=True)

    async def _open(self, fitted: Fitted, mode: RoundMode) -> Stream:
        room = self.ctx.window - fitted.prompt_tokens
        if self.state.stuck:
            room = min(room, RETRY_TOKENS)
        params = sampling(
            self.settings,
            max(1, min(self.settings.max_tokens, room)),
            seed=self.seed,
            retry=self.state.retries,
            strength=self.state.stuck,
            bias=self._bias(),
            least=EXTEND_MIN_TOKENS if self.state.extend else 0,
            constraint=self._constraint(),
            warm=self._list.warmth() if self._list is not None else 0.0,
        )
        self._params = params
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
        ("words", or the Repetition found)."""
        round_no = len(self.rec.rounds) + 1
        self._round_start = len(self.text)
        while self._round_starts and self._round_starts[-1][0] >= self._round_start:
            self._round_starts.pop()  # a round whose text was all cut away
        self._round_starts.append((self._round_start, round_no))
        self._detector = LoopDetector(
            self.text,
            floor=self.shown,
            restart=(mode in ("chat", "more") or self.state.extend) and bool(self.text),
            earlier=self._earlier,
        )
        dedupe = mode in ("chat", "more")
        base = self.text
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
            cut = self._take(piece, round_no)
            if cut is not None:
                return (d if d.finish_reason else None), cut
        if pending:
            cut = self._take(remove_overlap(base, pending), round_no)
            if cut is not None:
                return final, cut
        self.text += self.headings.flush()  # the round's end: its text is all there
        # the last line may be a sibling's title
        sibling = self.siblings.line(self.text, final=True)
        if sibling is not None:
            return final, self._at_sibling(*sibling, round_no)
        self._release(round_no=round_no)  # the last sentences stay held into the next round
        return final, None

    def _take(self, piece: str, round_no: int) -> str | Repetition | None:
        """Add a piece of the round's text; a loop or the length policy may end the round."""
        piece = self.headings.feed(piece)
        if not piece:
            return None
        self.text += piece
        if self._list is not None:  # a held list: its guard, not the loop detector
            refusal = self._list.guard.feed(self.text)
            if refusal is not None:
                return self._refuse(refusal)
        found = self._detector.feed(piece) if self._list is None else None
        if found is not None:
            if found.kind == "echo":
                self._covered.append(self.text[found.start :].strip()[:COVERED_CHARS])
            self.text = self.text[: max(len(self.text[: found.keep].rstrip()), self.shown)]
            return found  # what is still held may be cut by the retry's own loop
        sibling = self.siblings.line(self.text)
        if sibling is not None:
            return self._at_sibling(*sibling, round_no)
        end = self.policy.end(self.text, self.shown)
        if end is not None:
            self.text = self.text[:end]
            self._release(final=True, round_no=round_no)
            return "words"
        self._release(round_no=round_no)
        return None

    def _append(self, piece: str, round_no: int | None = None) -> None:
        """Text added between rounds (a seam, a held-back tail)."""
        if piece:
            self.text += piece
        self._release(round_no=round_no)

    def _release(self, final: bool = False, round_no: int | None = None) -> None:
        """Send as deltas the text that can no longer be cut away (see release_end), one
        per round whose text it holds."""
        end = release_end(self.text, self.shown, final)
        if end <= self.shown:
            return
        for number, piece in round_pieces(self.text, self.shown, end, self._round_starts, round_no):
            self.ctx.events.emit("delta", section=self.rec.key, round=number, text=piece)
        self.shown = end

    def _round(
        self,
        final: Delta | None,
        fitted: Fitted,
        mode: RoundMode,
        started: float,
        cut: str | Repetition | None,
    ) -> RoundRecord:
        seconds = time.monotonic() - started
        reason: int | str | None = None
        if isinstance(cut, Repetition):
            reason = "repetition"
        elif cut is not None:
            reason = "target_words" if cut == "words" else cut  # (else a sibling's title)
        if final is not None:
            record = RoundRecord(
                finish_reason="stop" if cut is not None else final.finish_reason or "stop",
                prompt_tokens=final.prompt_tokens or fitted.prompt_tokens,
                cached_prompt_tokens=final.cached_prompt_tokens,
                completion_tokens=final.completion_tokens,
                trimmed_tokens=fitted.trimmed_tokens,
                seconds=seconds,
                strategy=mode,
                stop_reason=reason if cut is not None else final.stop_reason,
                retry=self.state.retries,
                server_retries=final.retries,
                replica=final.replica or None,
            )
        else:  # cut before the backend reported usage
            record = RoundRecord(
                finish_reason="stop",
                prompt_tokens=fitted.prompt_tokens,
                cached_prompt_tokens=fitted.prompt_tokens if mode == "kv" else 0,
                # usage never arrived: count the round's text with the model's tokenizer
                completion_tokens=self.ctx.backend.count_text(self.text[self._round_start :]),
                trimmed_tokens=fitted.trimmed_tokens,
                seconds=seconds,
                strategy=mode,
                retry=self.state.retries,
                stop_reason=reason,
            )
        if isinstance(cut, Repetition):
            record.repetition = {"kind": cut.kind, "detail": cut.detail}
        self.requests.append(self._request(record, fitted, mode))
        self.ctx.events.emit(
            "round_finished",
            section=self.rec.key,
            round=len(self.rec.rounds) + 1,
            finish_reason=record.finish_reason,
            stop_reason=record.stop_reason,
            strategy=mode,
            prompt_tokens=record.prompt_tokens,
            cached_prompt_tokens=record.cached_prompt_tokens,
            completion_tokens=record.completion_tokens,
            trimmed_tokens=record.trimmed_tokens,
            words=count_words(self.text),
            retry=self.state.retries,
            repetition=record.repetition,
            server_retries=record.server_retries,
            seconds=round(seconds, 3),
            tokens_per_second=round(record.completion_tokens / seconds, 2) if seconds > 0 else 0.0,
        )
        return record
