"""A backend that only counts and renders: the model's tokenizer and context window, no
weights. `gen run --dry-run` plans every prompt with it, before (and instead of) loading the
model; asking it to generate is an error."""

from __future__ import annotations

import json
from typing import Any, NoReturn

from gen.backends.base import Message
from gen.engine import SamplingParams
from gen.errors import ModelError


class TokenizerBackend:
    """Counts like the backend `spec` opens would, and shows a prompt as it would send it:
    the chat template's text for a local model, the request's messages for a remote one."""

    def __init__(
        self,
        name: str,
        model: str,
        context_window: int,
        tokenizer: Any = None,
        supports_kv: bool = False,
        dtype: str | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.context_window = context_window
        self.tokenizer = tokenizer
        self.supports_kv = supports_kv  # what the real backend could do: the plan's strategy
        self.dtype = dtype

    def count_tokens(self, messages: list[Message]) -> int:
        if self.tokenizer is None:
            from gen.backends.openai import count_message_tokens

            return count_message_tokens(messages)
        return len(self._encode(messages, continue_final=False))

    def count_text(self, text: str) -> int:
        if self.tokenizer is None:
            from gen.backends.openai import count_text_tokens

            return count_text_tokens(text)
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def word_ids(self, word: str) -> list[int]:
        if self.tokenizer is None:
            return []
        from gen.engine.chat import word_ids

        return word_ids(self.tokenizer, word)

    def render(self, messages: list[Message], continue_final: bool = False) -> str:
        """The prompt as the model gets it."""
        if self.tokenizer is None:
            return json.dumps(messages, ensure_ascii=False, indent=2)
        text: str = self.tokenizer.apply_chat_template(
            list(messages),
            add_generation_prompt=not continue_final,
            continue_final_message=continue_final,
            tokenize=False,
        )
        return text

    def _encode(self, messages: list[Message], continue_final: bool) -> list[int]:
        from gen.engine.chat import encode_chat

        return encode_chat(self.tokenizer, messages, continue_final_message=continue_final)

    async def chat(
        self,
        messages: list[Message],
        params: SamplingParams,
        *,
        hold: bool = False,
        continue_final: bool = False,
    ) -> NoReturn:
        raise ModelError("a dry run generates nothing")

    async def aclose(self) -> None:
        return None


def open_tokenizer(
    spec: str, context_window: int | None = None, dtype: str | None = None
) -> TokenizerBackend:
    """The TokenizerBackend for a model spec: a local model's converted tokenizer and config
    (a GGUF is converted on first use, as a run would), or tiktoken for `openai:` models."""
    from gen.models import resolve

    ms = resolve(spec)
    if ms.kind == "openai":
        from gen.backends.openai import DEFAULT_WINDOW

        return TokenizerBackend("openai", ms.name, context_window or DEFAULT_WINDOW)
    from gen.models.loader import load_tokenizer, read_config
    from gen.models.store import prepare

    path = prepare(ms)
    tokenizer = load_tokenizer(path)
    window = read_config(path, tokenizer).max_position_embeddings
    return TokenizerBackend(
        "local", ms.name, window, tokenizer, supports_kv=True, dtype=dtype or "float32"
    )
