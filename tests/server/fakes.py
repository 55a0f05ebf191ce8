"""A served model without a model, for the app's fast tests: prompts are UTF-8 bytes, and
every request streams the same reply a character at a time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from gen.backends.base import Delta, Message
from gen.engine.engine import EngineStats
from gen.sampling import SamplingParams, TokenLogprob

REPLY = "你好，世界！🙂"


@dataclass
class FakeStream:
    prompt_tokens: int
    params: SamplingParams
    gate: asyncio.Event | None = None
    tail: str = ""  # the final delta's text (a flush)
    closed: bool = False

    async def deltas(self) -> AsyncIterator[Delta]:
        if self.gate is not None:
            await self.gate.wait()
        reply = REPLY[: self.params.max_tokens]
        for ch in reply:
            yield Delta(ch)
        finish = "length" if len(reply) < len(REPLY) else "stop"
        yield Delta(
            self.tail,
            finish_reason=finish,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=len(reply),
        )

    async def resume(self, max_tokens: int) -> None:
        raise NotImplementedError

    async def close(self) -> str:
        self.closed = True
        return ""


@dataclass
class FakeServed:
    model: str = "fake"
    context_window: int = 64
    vocab_size: int = 256
    gate: asyncio.Event | None = None  # streams wait for it before their first delta
    tail: str = ""  # what each stream's final delta flushes
    streams: list[FakeStream] = field(default_factory=list)
    params: list[SamplingParams] = field(default_factory=list)

    @property
    def stats(self) -> EngineStats:
        running = sum(not s.closed for s in self.streams)
        return EngineStats(running=running)

    def encode(
        self,
        messages: list[Message],
        continue_final: bool = False,
        add_generation_prompt: bool = True,
        tools: list[dict[str, Any]] | None = None,
    ) -> list[int]:
        text = "".join(f"{m['role']}: {m['content']}\n" for m in messages)
        return list(text.encode("utf-8"))

    def encode_text(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def check(self, params: SamplingParams) -> None:
        pass  # it follows no constraint

    def token_bytes(self, token_id: int) -> bytes:
        return bytes([token_id])

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> FakeStream:
        stream = FakeStream(len(prompt_ids), params, self.gate, self.tail)
        self.streams.append(stream)
        self.params.append(params)
        return stream

    async def prompt_logprobs(self, ids: list[int], top: int) -> list[TokenLogprob]:
        """Every prompt byte scored -1, its alternatives the next bytes up, scored -2."""
        return [
            TokenLogprob(i, -1.0, tuple((i + k, -2.0) for k in range(1, top + 1))) for i in ids[1:]
        ]

    async def aclose(self) -> None:
        return None
