"""backends.collect: one stream read to its end, as gen generate and the server's
non-streaming answers use it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from gen.backends.base import Delta
from gen.backends.collect import collect
from gen.errors import BackendError


class Scripted:
    def __init__(self, deltas: list[Delta], tail: str = "") -> None:
        self.script = deltas
        self.tail = tail
        self.closed = 0

    async def deltas(self) -> AsyncIterator[Delta]:
        for d in self.script:
            yield d

    async def resume(self, max_tokens: int) -> None:
        raise NotImplementedError

    async def close(self) -> str:
        self.closed += 1
        return self.tail


def test_text_finish_and_usage() -> None:
    final = Delta("!", "stop", "###", prompt_tokens=7, cached_prompt_tokens=3, completion_tokens=4)
    stream = Scripted([Delta("你"), Delta(""), Delta("好"), final])
    seen: list[str] = []
    done = asyncio.run(collect(stream, seen.append))
    assert (done.text, done.finish_reason, done.stop_reason) == ("你好!", "stop", "###")
    assert seen == ["你", "好", "!"] and stream.closed == 1
    assert done.usage == {
        "prompt_tokens": 7,
        "completion_tokens": 4,
        "total_tokens": 11,
        "prompt_tokens_details": {"cached_tokens": 3},
    }


def test_text_held_back_until_close_is_kept() -> None:
    stream = Scripted([Delta("a"), Delta("", "length", completion_tokens=2)], tail="b")
    assert asyncio.run(collect(stream)).text == "ab"


def test_a_stream_without_a_finish_is_an_error_and_still_closed() -> None:
    stream = Scripted([Delta("a")])
    with pytest.raises(BackendError, match="finish reason"):
        asyncio.run(collect(stream))
    assert stream.closed == 1
