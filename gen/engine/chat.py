"""Chat messages to prompt ids through the model's own chat template."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol


class ChatTokenizer(Protocol):
    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any: ...

    def encode(self, text: str, **kwargs: Any) -> list[int]: ...


def with_tool_calls(messages: Sequence[Mapping[str, Any]], template: Any) -> list[dict[str, Any]]:
    """The turns for `template`: an assistant turn's tool_calls as they are where the
    template renders tool calls; else (a template that never reads them) written into the
    turn's content, one JSON object {"name", "arguments"} per line after any text, so the
    model still sees what it called. A null content is empty text there."""
    takes = isinstance(template, str) and "tool_calls" in template
    turns = []
    for m in messages:
        turn = dict(m)
        calls = turn.get("tool_calls")
        if calls and not takes:
            del turn["tool_calls"]
            lines = [turn.get("content") or ""]
            for call in calls:
                function = call.get("function", call)
                named = {"name": function.get("name"), "arguments": function.get("arguments")}
                lines.append(json.dumps(named, ensure_ascii=False))
            turn["content"] = "\n".join(line for line in lines if line)
        turns.append(turn)
    return turns


TOOLS_PROMPT = (
    "You can call these tools. To call tools, answer with only a JSON list of calls, "
    '[{{"name": <tool name>, "arguments": {{<arguments>}}}}], and nothing else; '
    "otherwise answer in text.\nTools:\n{tools}"
)


def _reads(template: Any, word: str) -> bool:
    return isinstance(template, str) and word in template


def with_tools(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The turns for a template that never reads `tools`: the tools written into the
    system turn (one added first where there is none), one JSON line each (name,
    description, parameters), after how to call them."""
    lines = [json.dumps(t.get("function", t), ensure_ascii=False) for t in tools]
    block = TOOLS_PROMPT.format(tools="\n".join(lines))
    turns = [dict(m) for m in messages]
    if turns and turns[0].get("role") == "system":
        turns[0]["content"] = f"{turns[0].get('content') or ''}\n\n{block}".lstrip()
    else:
        turns.insert(0, {"role": "system", "content": block})
    return turns


def with_tool_results(messages: Sequence[Mapping[str, Any]], template: Any) -> list[dict[str, Any]]:
    """The turns for `template`: tool turns as they are where the template renders the
    role "tool"; else each as a user turn "Result of <name> (<id>): <content>", results
    in a row joined into one turn (templates that want user and assistant to alternate)."""
    if _reads(template, "'tool'") or _reads(template, '"tool"'):
        return [dict(m) for m in messages]
    names: dict[str, str] = {}
    turns: list[dict[str, Any]] = []
    for m in messages:
        for call in m.get("tool_calls") or []:
            names[call.get("id", "")] = call.get("function", call).get("name", "")
        if m.get("role") != "tool":
            turns.append(dict(m))
            continue
        call_id = m.get("tool_call_id", "")
        line = f"Result of {names.get(call_id, 'a tool')} ({call_id}): {m.get('content') or ''}"
        if turns and turns[-1].get("tool_results"):
            turns[-1]["content"] += "\n" + line
        else:
            turns.append({"role": "user", "content": line, "tool_results": True})
    for turn in turns:
        turn.pop("tool_results", None)
    return turns


def encode_chat(
    tokenizer: ChatTokenizer,
    messages: Sequence[Mapping[str, Any]],
    add_generation_prompt: bool = True,
    continue_final_message: bool = False,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> list[int]:
    """Render and tokenize `messages`; with continue_final_message the last assistant
    message is left open so generation continues it (the `prefix` strategy). `tools` go
    to a template that reads them (transformers' `tools`), else into the system turn
    (with_tools). Tool calls and results: see with_tool_calls, with_tool_results."""
    template = getattr(tokenizer, "chat_template", None)
    turns = with_tool_results(with_tool_calls(messages, template), template)
    kwargs: dict[str, Any] = {}
    if tools and _reads(template, "tools"):
        kwargs["tools"] = list(tools)
    elif tools:
        turns = with_tools(turns, tools)
    ids = tokenizer.apply_chat_template(
        turns,
        add_generation_prompt=add_generation_prompt and not continue_final_message,
        continue_final_message=continue_final_message,
        tokenize=True,
        return_dict=False,
        **kwargs,
    )
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):
        ids = ids["input_ids"]
    return [int(i) for i in ids]


def word_ids(tokenizer: ChatTokenizer, word: str) -> list[int]:
    """The first token of `word` in each form it may take in text (capitalised or not,
    after a space or not): what a logit_bias against the word must name."""
    forms = {word, word.capitalize(), f" {word}", f" {word.capitalize()}"}
    ids = (tokenizer.encode(form, add_special_tokens=False) for form in forms)
    return sorted({found[0] for found in ids if found})
