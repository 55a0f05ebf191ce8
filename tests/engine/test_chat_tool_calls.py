"""with_tool_calls: an assistant turn's tool calls go to a chat template that renders them,
and into the turn's text (a JSON line per call) for one that never reads them; tool results
and the tools offered likewise (with_tool_results, with_tools)."""

from __future__ import annotations

import json
from typing import Any

from gen.engine.chat import TOOLS_PROMPT, with_tool_calls, with_tool_results, with_tools

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


RESULTS: list[dict[str, Any]] = [
    *TURNS,
    {"role": "tool", "tool_call_id": "call_1", "content": "小雨 🌧"},
    {"role": "tool", "tool_call_id": "call_2", "content": "12°C"},
]


def test_a_template_that_renders_tool_turns_gets_them() -> None:
    template = (
        "{% for m in messages %}{% if m.role == 'tool' %}{{ m.content }}{% endif %}{% endfor %}"
    )
    assert with_tool_results(RESULTS, template) == RESULTS


def test_tool_results_are_one_user_turn_for_a_template_that_does_not() -> None:
    *history, results = with_tool_results(RESULTS, "{{ messages }}")
    assert history == TURNS
    assert results == {
        "role": "user",
        "content": "Result of 天气 (call_1): 小雨 🌧\nResult of a tool (call_2): 12°C",
    }


def test_tools_go_into_the_system_turn() -> None:
    tool = {"type": "function", "function": {"name": "天气", "parameters": {"type": "object"}}}
    (system, *rest) = with_tools(TURNS, [tool])
    assert rest == TURNS and system["role"] == "system"
    assert system["content"] == TOOLS_PROMPT.format(
        tools=json.dumps(tool["function"], ensure_ascii=False)
    )
    (joined, _) = with_tools([{"role": "system", "content": "简短。"}, TURNS[0]], [tool])
    assert joined["content"].startswith("简短。\n\n") and "天气" in joined["content"]
