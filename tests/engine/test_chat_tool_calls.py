"""with_tool_calls: an assistant turn's tool calls go to a chat template that renders them,
and into the turn's text (a JSON line per call) for one that never reads them."""

from __future__ import annotations

import json
from typing import Any

from gen.engine.chat import with_tool_calls

CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "天气", "arguments": {"城市": "北京"}},
}
TURNS: list[dict[str, Any]] = [
    {"role": "user", "content": "北京天气？🌤"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
]


def test_a_template_that_renders_tool_calls_gets_them() -> None:
    template = "{% for m in messages %}{{ m.tool_calls | tojson }}{% endfor %}"
    assert with_tool_calls(TURNS, template) == TURNS


def test_a_template_that_does_not_gets_them_as_json_lines() -> None:
    plain = "{% for m in messages %}{{ m.content }}{% endfor %}"
    user, assistant = with_tool_calls([*TURNS[:1], {**TURNS[1], "content": "查一下。"}], plain)
    assert user == TURNS[0] and "tool_calls" not in assistant
    text, line = assistant["content"].split("\n")
    assert text == "查一下。"
    assert json.loads(line) == {"name": "天气", "arguments": {"城市": "北京"}}
    (_, alone) = with_tool_calls(TURNS, None)  # null content: the calls alone
    assert json.loads(alone["content"])["name"] == "天气"
