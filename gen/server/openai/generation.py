"""One admitted request from submission to its end: its place in the queue, its timing and
token counts for /metrics, and its sequence aborted (KV memory freed) however it ends."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from gen.backends.base import Delta, Message, Stream
from gen.engine.detokenizer import REPLACEMENT
from gen.engine.grammar import GrammarError
from gen.errors import BackendError
from gen.sampling import InvalidParam, SamplingParams, TokenLogprob
from gen.server.errors import busy
from gen.server.metrics import Metrics

if TYPE_CHECKING:
    from gen.engine.engine import EngineStats


class ServedModel(Protocol):
    """What the server needs of a backend; the built-in engine's LocalBackend is one."""

    model: str
    context_window: int
    vocab_size: int

    @property
    def stats(self) -> EngineStats: ...

    def encode(
        self,
        messages: list[Message],
        continue_final: bool = False,
        add_generation_prompt: bool = True,
        tools: list[dict[str, Any]] | None = None,
    ) -> list[int]: ...

    def encode_text(self, text: str) -> list[int]: ...

    def token_bytes(self, token_id: int) -> bytes: ...

    def check(self, params: SamplingParams) -> None: ...

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Stream: ...

    async def prompt_logprobs(self, ids: list[int], top: int) -> list[TokenLogprob]: ...

    async def aclose(self) -> None: ...


class Admission:
    """At most `limit` requests admitted and unanswered; past it a 429 with Retry-After.
    A request is admitted before its body is read, so the limit bounds the memory that
    bodies, prompts and grammars being prepared can hold, not only the engine's queue."""

    def __init__(self, limit: int, metrics: Metrics) -> None:
        self.limit = limit
        self.count = 0
        self.metrics = metrics

    def enter(self) -> Place:
        if self.count >= self.limit:
            self.metrics.rejected.labels(self.metrics.model).inc()
            raise busy(
                f"the server is busy: {self.count} requests are queued or running "
                f"(limit {self.limit}, gen serve --max-queue); retry shortly",
                code="queue_full",
                retry_after=1,
            )
        self.count += 1
        return Place(self)


class Place:
    """One request's place in the queue; given back once, however often leave() is called."""

    def __init__(self, admission: Admission) -> None:
        self.admission = admission
        self.held = True

    def leave(self) -> None:
        if self.held:
            self.held = False
            self.admission.count -= 1


class Generation:
    """A request's stream, timed and counted; close() ends it and gives its place back."""

    def __init__(self, stream: Stream, place: Place, metrics: Metrics) -> None:
        self.stream = stream
        self.place = place
        self.metrics = metrics
        self.start = time.perf_counter()
        self.first: float | None = None
        self.finished = False
        self.closed = False

    async def deltas(self) -> AsyncIterator[Delta]:
        async for d in self.stream.deltas():
            if d.finish_reason is not None and d.text.endswith(REPLACEMENT):
                # the generation stopped inside a character: its half is not text (a client
                # continuing the reply as a prefix would otherwise write U+FFFD into it)
                d = replace(d, text=d.text.rstrip(REPLACEMENT))
            now = time.perf_counter()
            if self.first is None and (d.text or d.logprobs):
                self.first = now - self.start
            if d.finish_reason is not None:
                self.finished = True
                self.metrics.finished(
                    d.finish_reason,
                    d.prompt_tokens,
                    d.cached_prompt_tokens,
                    d.completion_tokens,
                    self.first,
                    now - self.start,
                )
            yield d

    async def resume(self, max_tokens: int) -> None:
        raise BackendError("a served request has one round")

    async def close(self) -> str:
        """Idempotent; an unfinished request is aborted and its KV memory freed."""
        if self.closed:
            return ""
        self.closed = True
        self.place.leave()
        if not self.finished:
            self.metrics.aborted()
        return await self.stream.close()


class ConstrainedStream:
    """A constrained request's stream: its grammar failing mid-generation (too costly to
    lex or parse, or nothing it allows: `a{99999999}`, a schema that only refers to
    itself) is the request's fault, a 400 (param `constraint`, as for a grammar
    that does not compile; the message names `field`), not a server error."""

    def __init__(self, inner: Stream, field: str) -> None:
        self.inner = inner
        self.field = field

    async def deltas(self) -> AsyncIterator[Delta]:
        try:
            async for d in self.inner.deltas():
                yield d
        except BackendError as exc:
            if not isinstance(exc.__cause__, GrammarError):
                raise
            reason = str(exc.__cause__).split("\n")[0]  # not llguidance's state dump
            message = f"the output cannot follow the {self.field}: {reason}"
            raise InvalidParam("constraint", message) from None

    async def resume(self, max_tokens: int) -> None:
        await self.inner.resume(max_tokens)

    async def close(self) -> str:
        return await self.inner.close()


class FaultyStream:
    """A stream that fails after `after` deltas, as a failing engine step would: the test
    hook GEN_SERVE_FAULT=<marker> turns it on for requests whose `user` is the marker."""

    def __init__(self, inner: Stream, after: int = 2) -> None:
        self.inner = inner
        self.after = after

    async def deltas(self) -> AsyncIterator[Delta]:
        sent = 0
        async for d in self.inner.deltas():
            if sent == self.after:
                raise BackendError("generation failed: injected fault (GEN_SERVE_FAULT)")
            sent += 1
            yield d

    async def resume(self, max_tokens: int) -> None:
        await self.inner.resume(max_tokens)

    async def close(self) -> str:
        return await self.inner.close()
