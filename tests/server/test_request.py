"""A request's prompt is encoded on the event loop when it is short (a hop to a worker
thread and back cost more than encoding it) and on a worker thread when it is long (it
can take seconds while other streams wait); its size counted over what it is made of."""

from __future__ import annotations

import asyncio
import threading

from gen.server.openai.requests import ChatMessage
from gen.server.request import INLINE_CHARS, encoded, text_size


def test_a_short_prompt_is_encoded_on_the_loop_and_a_long_one_off_it() -> None:
    def where(text: str, *, tools: list[str]) -> tuple[str, int]:
        return threading.current_thread().name, len(text) + len(tools)

    async def both() -> tuple[str, tuple[str, int], tuple[str, int]]:
        loop = threading.current_thread().name
        short = await encoded(INLINE_CHARS, where, "春天 🌸", tools=[])
        long = await encoded(INLINE_CHARS + 1, where, "龙" * 9000, tools=["x"])
        return loop, short, long

    loop, short, long = asyncio.run(both())
    assert short == (loop, 4)
    assert long[0] != loop and long[1] == 9001


def test_the_size_of_a_prompt_counts_its_text_wherever_it_sits() -> None:
    turns = [{"role": "user", "content": "你好 🌸"}, {"role": "assistant", "content": None}]
    tools = [{"type": "function", "function": {"name": "天气", "parameters": {"a": "ab"}}}]
    assert text_size(turns) == len("user") + len("你好 🌸") + len("assistant")
    assert text_size(turns, tools) == text_size(turns) + len("function天气ab")
    assert text_size([[1, 2, 3]]) == 12  # token ids: about four characters each
    message = ChatMessage(role="user", content="สวัสดี")
    assert text_size([message]) == len("user") + len("สวัสดี")
