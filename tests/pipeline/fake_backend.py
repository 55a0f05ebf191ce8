"""A scripted Backend for orchestrator tests: replies per prompt key and round, tokens
counted as characters, and a log of every call (chat, resume, close) in the order it came.

A prompt's key is the first `[word]` in its first user message (`[intro] Write ...`);
prompts without one use the key "default". `scripts[key]` lists that key's rounds in
order, each `(text, finish_reason)` or an exception to raise when the round streams. A key
with no script answers `f"Text of {key}."` with "stop" every round.

`streams[key]` instead lists that key's requests in order, each the whole text the model
would write: a round writes up to its max_tokens characters of it ("length"; a held
stream parks and a resume writes on) and its end ends the request ("stop"), so the same
text can be cut into rounds of any size.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gen.backends.base import Delta, Message
from gen.engine import SamplingParams
from gen.pipeline import Pipeline, load_pipeline_text
from gen.pipeline.run.events import Event
from gen.pipeline.run.runner import PreparedRun, prepare_run

Reply = tuple[str, str] | BaseException
_KEY = re.compile(r"\[([\w-]+)\]")


def count_chars(messages: Sequence[Message]) -> int:
    """The fake's tokenizer: one token per character of every message's content."""
    return sum(len(m["content"]) for m in messages)


def key_of(messages: Sequence[Message]) -> str:
    first_user = next(m["content"] for m in messages if m["role"] == "user")
    match = _KEY.search(first_user)
    return match.group(1) if match else "default"


@dataclass(slots=True)
class ChatCall:
    key: str
    messages: list[Message]
    params: SamplingParams
    hold: bool
    continue_final: bool


@dataclass(slots=True)
class FakeStream:
    backend: FakeBackend
    call: ChatCall
    prompt_tokens: int
    cached_prompt_tokens: int = 0
    parked: bool = False
    closed: bool = False
    carried: int = 0
    rounds: int = 0
    flow: str | None = None  # a streamed request: the text it has still to write
    budget: int = 0  # the round's max_tokens

    def _next(self) -> Reply:
        """The round's reply: scripted, or the next max_tokens characters of the flow."""
        if self.flow is None:
            return self.backend.take(self.call.key)
        text, self.flow = self.flow[: self.budget], self.flow[self.budget :]
        return text, "length" if self.flow else "stop"

    async def deltas(self) -> AsyncIterator[Delta]:
        key, chunk = self.call.key, self.backend.chunk
        reply = self._next()
        self.rounds += 1
        await asyncio.sleep(0)
        if isinstance(reply, BaseException):
            self.backend.log.append(("error", key))
            raise reply
        text, finish = reply
        stop_reason: str | None = None
        if self.backend.stop_on_strings:  # like the engine: the earliest stop string ends it
            found = [(text.find(s), s) for s in self.call.params.stop if s in text]
            if found:
                at, stop_reason = min(found)
                text, finish = text[:at], "stop"
        pieces = [text[i : i + chunk] for i in range(0, len(text), chunk)] or [""]
        for piece in pieces[:-1]:
            yield Delta(piece)
            await asyncio.sleep(0)  # let other sections run between pieces
        self.parked = finish == "length" and self.call.hold
        self.carried = self.prompt_tokens + len(text)
        self.backend.log.append(("end", key))
        yield Delta(
            pieces[-1],
            finish_reason=finish,
            stop_reason=stop_reason,
            prompt_tokens=self.prompt_tokens,
            cached_prompt_tokens=self.cached_prompt_tokens,
            completion_tokens=len(text),
        )

    async def resume(self, max_tokens: int) -> None:
        assert self.parked, "resume() on a stream that did not park"
        self.parked = False
        self.backend.resumes.append((self.call.key, max_tokens))
        self.backend.log.append(("resume", self.call.key))
        self.budget = max_tokens
        # like the engine: the carried context is the new round's prompt, all of it cached
        self.prompt_tokens = self.cached_prompt_tokens = self.carried

    async def close(self) -> str:
        """Text a parked kv stream still held back (`tails[key]`), as the engine returns it."""
        if self.closed:
            return ""
        self.closed = True
        self.backend.closes.append(self.call.key)
        return self.backend.tails.get(self.call.key, "") if self.parked else ""


@dataclass
class FakeBackend:
    scripts: dict[str, list[Reply]] = field(default_factory=dict)
    streams: dict[str, list[str]] = field(default_factory=dict)  # key -> each request's text
    supports_kv: bool = True
    supports_grammar: bool = False
    context_window: int = 100_000
    chunk: int = 4  # characters per streamed delta
    name: str = "fake"
    model: str = "fake-model"
    dtype: str | None = None
    calls: list[ChatCall] = field(default_factory=list)
    resumes: list[tuple[str, int]] = field(default_factory=list)
    closes: list[str] = field(default_factory=list)
    log: list[tuple[str, str]] = field(default_factory=list)  # (start|end|resume|error, key)
    closed: bool = False
    tails: dict[str, str] = field(default_factory=dict)  # key -> held text a close releases
    stop_on_strings: bool = False  # end a reply at the first of the request's stop strings
    keys: Callable[[list[Message]], str] = key_of  # which script a request's messages take
    # scores a text after each conversation (Backend.score); None: the backend cannot
    scorer: Callable[[list[list[Message]], str], list[list[float]]] | None = None
    scored: list[str] = field(default_factory=list)  # the texts asked to score, in order
    _next: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def count_text(self, text: str) -> int:
        return len(text)

    def word_ids(self, word: str) -> list[int]:
        """A word's "first token": its first character's code point."""
        return [ord(word[0])] if word else []

    def count_tokens(self, messages: list[Message]) -> int:
        return count_chars(messages)

    def take(self, key: str) -> Reply:
        index = self._next[key]
        self._next[key] += 1
        if key not in self.scripts:
            return f"Text of {key}.", "stop"
        script = self.scripts[key]
        if index >= len(script):
            raise AssertionError(f"no round {index + 1} scripted for {key!r}")
        return script[index]

    async def chat(
        self,
        messages: list[Message],
        params: SamplingParams,
        *,
        hold: bool = False,
        continue_final: bool = False,
    ) -> FakeStream:
        call = ChatCall(self.keys(messages), copy.deepcopy(messages), params, hold, continue_final)
        self.calls.append(call)
        self.log.append(("start", call.key))
        flow = None
        if call.key in self.streams:
            flow = self.streams[call.key][self._next[call.key]]
            self._next[call.key] += 1
        return FakeStream(self, call, count_chars(messages), flow=flow, budget=params.max_tokens)

    async def score(
        self, contexts: list[list[Message]], text: str, limit: int | None = None
    ) -> list[list[float]] | None:
        if self.scorer is None:
            return None
        self.scored.append(text)
        return self.scorer(contexts, text)

    async def aclose(self) -> None:
        self.closed = True

    def call_keys(self) -> list[str]:
        """The key of every chat call, in order."""
        return [c.key for c in self.calls]

    def calls_for(self, key: str) -> list[ChatCall]:
        return [c for c in self.calls if c.key == key]


# -- running pipelines in tests -------------------------------------------------------------


def pipeline_from(text: str, base_dir: Path | None = None, **overrides: Any) -> Pipeline:
    return load_pipeline_text(text, file="test.yaml", base_dir=base_dir, overrides=overrides)


def prepare(
    pipeline: Pipeline,
    backend: FakeBackend,
    out: Path,
    *,
    resume: bool = False,
    subscribers: Iterable[Any] = (),
) -> PreparedRun:
    return prepare_run(
        pipeline, backend, out, model="fake-model", resume=resume, subscribers=tuple(subscribers)
    )


def run(
    pipeline: Pipeline, backend: FakeBackend, out: Path, *, resume: bool = False
) -> tuple[dict[str, Any], PreparedRun]:
    """Run the pipeline to the end; returns (manifest, prepared run)."""
    prepared = prepare(pipeline, backend, out, resume=resume)
    manifest = asyncio.run(prepared.execute())
    return manifest, prepared


def read_events(path: Path) -> list[Event]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def sections_by_id(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in manifest["sections"]}


def install(monkeypatch: Any, backend: FakeBackend) -> list[tuple[Any, ...]]:
    """Make `gen run` use `backend`; returns the arguments open_backend was called with."""
    import gen.backends

    opened: list[tuple[Any, ...]] = []

    def open_backend(*args: Any, **kwargs: Any) -> FakeBackend:
        opened.append(args)
        return backend

    monkeypatch.setattr(gen.backends, "open_backend", open_backend)
    return opened
