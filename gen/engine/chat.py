"""Chat messages to prompt ids through the model's own chat template."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class ChatTokenizer(Protocol):
    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any: ...

    def encode(self, text: str, **kwargs: Any) -> list[int]: ...


def encode_chat(
    tokenizer: ChatTokenizer,
    messages: Sequence[dict[str, str]],
    add_generation_prompt: bool = True,
    continue_final_message: bool = False,
) -> list[int]:
    """Render and tokenize `messages`; with continue_final_message the last assistant
    message is left open so generation continues it (the `prefix` strategy)."""
    ids = tokenizer.apply_chat_template(
        list(messages),
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
