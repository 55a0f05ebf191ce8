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


def encode_chat(
    tokenizer: ChatTokenizer,
    messages: Sequence[Mapping[str, Any]],
    add_generation_prompt: bool = True,
    continue_final_message: bool = False,
) -> list[int]:
    """Render and tokenize `messages`; with continue_final_message the last assistant
    message is left open so generation continues it (the `prefix` strategy). Tool calls:
    see with_tool_calls."""
    ids = tokenizer.apply_chat_template(
        with_tool_calls(messages, getattr(tokenizer, "chat_template", None)),
        add_generation_prompt=add_generation_prompt and not continue_final_message,
        continue_final_message=continue_final_message,
        tokenize=True,
        return_dict=False,
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
