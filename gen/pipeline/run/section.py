"""One section's rounds: render and fit the prompt, stream a round, continue while the
round was cut off (kv / prefix / chat) or the text is short of its target.

Works against the Backend protocol; the orchestrator decides what runs when.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from gen.backends.base import Backend, Delta, Message, Stream
from gen.engine.detokenizer import REPLACEMENT
from gen.engine.sampling_params import SamplingParams
from gen.errors import ContextOverflowError
from gen.pipeline.render import render_prompt, render_system
from gen.pipeline.run.budget import Fitted, fit_prompt
from gen.pipeline.run.continuation import CONTINUE_PROMPT, MORE_PROMPT, LengthPolicy, remove_overlap
from gen.pipeline.run.events import EventLog
from gen.pipeline.run.records import RoundRecord, SectionRecord
from gen.pipeline.spec import GenerationSettings, Pipeline, Section
from gen.pipeline.words import count_words, length_score


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


def sampling(settings: GenerationSettings, max_tokens: int) -> SamplingParams:
    return SamplingParams(
        max_tokens=max_tokens,
        temperature=settings.temperature,
        top_p=settings.top_p,
        top_k=settings.top_k,
        min_p=settings.min_p,
        repetition_penalty=settings.repetition_penalty,
        seed=settings.seed,
        stop=tuple(settings.stop),
        min_tokens=min(settings.min_tokens, max_tokens),
    )


def strategy_for(settings: GenerationSettings, backend: Backend) -> str:
    """The configured continuation; `kv` needs a backend that keeps state, else `chat`."""
    if settings.continuation == "kv" and not backend.supports_kv:
        return "chat"
    return settings.continuation


class SectionRun:
    def __init__(
        self, ctx: RunContext, section: Section, record: SectionRecord, variables: dict[str, Any]
    ) -> None:
        self.ctx = ctx
        self.section = section
        self.rec = record
        self.variables = variables
        self.settings = ctx.pipeline.settings_for(section)
        self.strategy = strategy_for(self.settings, ctx.backend)
        self.policy = LengthPolicy(section.target_words, section.min_words, section.max_words)
        self.system = render_system(ctx.pipeline, section, variables)
        self.text = ""
        self._round_start = 0  # where the current round's text begins in self.text

    # -- prompt ---------------------------------------------------------------------

    def build(self, variables: dict[str, Any], mode: str = "initial") -> list[Message]:
        messages: list[Message] = []
        if self.system:
            messages.append({"role": "system", "content": self.system})
        user = render_prompt(self.ctx.pipeline, self.section, variables)
        messages.append({"role": "user", "content": user})
        if mode == "prefix":
            messages.append({"role": "assistant", "content": self.text})
        elif mode in ("chat", "more"):
            messages.append({"role": "assistant", "content": self.text})
            messages.append(
                {"role": "user", "content": CONTINUE_PROMPT if mode == "chat" else MORE_PROMPT}
            )
        return messages

    def fit(self, mode: str = "initial") -> Fitted:
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
        max_rounds = self.settings.max_rounds
        fitted, mode = first, "initial"
        stream = await self._open(fitted, mode)
        try:
            while True:
                started = time.monotonic()
                final, cut = await self._consume(stream, mode)
                self.rec.rounds.append(self._round(final, fitted, mode, started, cut))
                if cut is not None:
                    break  # stop: the length policy ended the section at a boundary
                finish = final.finish_reason if final else "stop"
                if finish == "length":
                    if len(self.rec.rounds) >= max_rounds:
                        # stop: rounds used up; a section past its target is complete
                        self.rec.truncated = self.policy.target is None or self.policy.short(
                            self.text
                        )
                        break
                    mode = self.strategy  # go on (past the target: to a paragraph end)
                elif finish == "stop" and self.policy.short(self.text):
                    if len(self.rec.rounds) >= max_rounds:
                        break
                    mode = "more"
                else:
                    break  # stop: the model finished (or a remote filter ended it)
                if mode == "kv":
                    assert final is not None
                    room = self.ctx.window - (final.prompt_tokens + final.completion_tokens)
                    if room < 1:
                        self.rec.truncated = True
                        break  # stop: the context window cannot hold another round
                    fitted = Fitted([], final.prompt_tokens + final.completion_tokens, 0)
                    await stream.resume(min(self.settings.max_tokens, room))
                    continue
                self._append(await stream.close())
                try:
                    fitted = self.fit(mode)
                except ContextOverflowError:  # the text so far no longer fits the budget
                    self.rec.truncated = finish == "length"
                    break  # stop: the context budget cannot hold another round
                if self.ctx.window - fitted.prompt_tokens < 1:
                    self.rec.truncated = finish == "length"
                    break  # stop: the context budget cannot hold another round
                if mode == "more" and self.text and not self.text.endswith("\n"):
                    self._append("\n\n")
                stream = await self._open(fitted, mode)
        finally:
            tail = await stream.close()
            cut_off = bool(self.rec.rounds) and self.rec.rounds[-1].finish_reason == "length"
            if cut_off:
                tail = tail.rstrip(REPLACEMENT)  # half a character at the cut is not text
            self._append(tail)
        self.rec.text = self.text
        self.rec.words = count_words(self.text)
        self.rec.target_words = self.section.target_words
        if self.section.target_words:
            self.rec.length_score = length_score(self.section.target_words, max(self.rec.words, 1))

    async def _open(self, fitted: Fitted, mode: str) -> Stream:
        room = self.ctx.window - fitted.prompt_tokens
        params = sampling(self.settings, max(1, min(self.settings.max_tokens, room)))
        return await self.ctx.backend.chat(
            fitted.messages,
            params,
            hold=self.strategy == "kv",
            continue_final=mode == "prefix",
        )

    async def _consume(self, stream: Stream, mode: str) -> tuple[Delta | None, str | None]:
        """Stream one round into the text; returns its final delta and why it was cut."""
        round_no = len(self.rec.rounds) + 1
        self._round_start = len(self.text)
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
            if piece:
                keep = self.policy.cut(self.text, piece)
                if keep is not None:
                    self._append(keep[len(self.text) :], round_no)
                    return d if d.finish_reason else None, "words"
                self._append(piece, round_no)
            if d.finish_reason is not None:
                final = d
        if pending:
            self._append(remove_overlap(base, pending), round_no)
        return final, None

    def _append(self, piece: str, round_no: int | None = None) -> None:
        if not piece:
            return
        self.text += piece
        self.ctx.events.emit(
            "delta",
            section=self.rec.key,
            round=round_no or max(1, len(self.rec.rounds)),
            text=piece,
        )

    def _round(
        self, final: Delta | None, fitted: Fitted, mode: str, started: float, cut: str | None
    ) -> RoundRecord:
        seconds = time.monotonic() - started
        if final is not None and cut is None:
            record = RoundRecord(
                finish_reason=final.finish_reason or "stop",
                prompt_tokens=final.prompt_tokens or fitted.prompt_tokens,
                cached_prompt_tokens=final.cached_prompt_tokens,
                completion_tokens=final.completion_tokens,
                trimmed_tokens=fitted.trimmed_tokens,
                seconds=seconds,
                strategy=mode,
                stop_reason=final.stop_reason,
            )
        else:  # ended by the length policy before the backend reported usage
            record = RoundRecord(
                finish_reason="stop",
                prompt_tokens=fitted.prompt_tokens,
                cached_prompt_tokens=fitted.prompt_tokens if mode == "kv" else 0,
                # usage never arrived: count the round's text with the model's tokenizer
                completion_tokens=self.ctx.backend.count_text(self.text[self._round_start :]),
                trimmed_tokens=fitted.trimmed_tokens,
                seconds=seconds,
                strategy=mode,
                stop_reason="target_words" if cut else None,
            )
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
        )
        return record
