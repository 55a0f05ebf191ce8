"""Counting and showing prompts without generating: `ChatTokens` counts with a model's own
tokenizer (the built-in engine's backend is one); the plan backends are what `gen run
--dry-run` plans every prompt with, before (and instead of) loading the model."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, NoReturn

from gen.backends.base import Message
from gen.engine.chat import encode_chat, word_ids
from gen.errors import ModelError
from gen.sampling import SamplingParams


class ChatTokens:
    """Counting with a Hugging Face tokenizer (`self.tokenizer`), chat template applied."""

    tokenizer: Any

    def encode(
        self,
        messages: list[Message],
        continue_final: bool = False,
        add_generation_prompt: bool = True,
        tools: list[dict[str, Any]] | None = None,
    ) -> list[int]:
        return encode_chat(
            self.tokenizer,
            messages,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=continue_final,
            tools=tools,
        )

    def encode_text(self, text: str) -> list[int]:
        """Raw text as a prompt (no chat template), special tokens as the model adds them."""
        return [int(i) for i in self.tokenizer.encode(text)]

    def count_tokens(self, messages: list[Message]) -> int:
        return len(self.encode(messages))

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes one token stands for (a piece of a UTF-8 character, maybe)."""
        return token_bytes(self.tokenizer, token_id)

    def count_text(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def word_ids(self, word: str) -> list[int]:
        return word_ids(self.tokenizer, word)


@lru_cache(maxsize=1)
def _byte_level() -> dict[str, int]:
    """GPT-2's byte-level alphabet, reversed: printable Latin-1 bytes are spelt as
    themselves, every other byte as chr(256 + n) for the n-th of them."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    others = [b for b in range(256) if b not in printable]
    alphabet = {chr(b): b for b in printable}
    alphabet.update({chr(256 + n): b for n, b in enumerate(others)})
    return alphabet


def token_bytes(tokenizer: Any, token_id: int) -> bytes:
    """A token's own bytes: spelt out of a byte-level BPE's alphabet where it is one, else
    its decoded text (special tokens included)."""
    piece = tokenizer.convert_ids_to_tokens(token_id)
    alphabet = _byte_level()
    if isinstance(piece, str) and piece and all(c in alphabet for c in piece):
        return bytes(alphabet[c] for c in piece)
    return str(tokenizer.decode([token_id])).encode("utf-8")


class _Plan:
    """A backend that only plans: asking it to generate is an error."""

    async def chat(
        self,
        messages: list[Message],
        params: SamplingParams,
        *,
        hold: bool = False,
        continue_final: bool = False,
    ) -> NoReturn:
        raise ModelError("a dry run generates nothing")

    async def score(
        self, contexts: list[list[Message]], text: str, limit: int | None = None
    ) -> list[list[float]] | None:
        return None  # a plan has no weights to score with

    async def aclose(self) -> None:
        return None


class LocalPlanBackend(ChatTokens, _Plan):
    """A local model's tokenizer and context window, no weights; shows a prompt as the chat
    template's text."""

    name = "local"
    supports_kv = True  # what the engine could do: the plan's strategy
    supports_grammar = True

    def __init__(self, model: str, context_window: int, tokenizer: Any, dtype: str) -> None:
        self.model = model
        self.context_window = context_window
        self.tokenizer = tokenizer
        self.dtype: str | None = dtype

    def render(self, messages: list[Message], continue_final: bool = False) -> str:
        text: str = self.tokenizer.apply_chat_template(
            list(messages),
            add_generation_prompt=not continue_final,
            continue_final_message=continue_final,
            tokenize=False,
        )
        return text


class RemotePlanBackend(_Plan):
    """A remote model counted as the `openai:` backend counts it; shows a prompt as the
    request's messages."""

    name = "openai"
    supports_kv = False
    supports_grammar = False
    dtype: str | None = None

    def __init__(self, model: str, context_window: int) -> None:
        self.model = model
        self.context_window = context_window

    def count_tokens(self, messages: list[Message]) -> int:
        from gen.backends.openai import count_message_tokens

        return count_message_tokens(messages)

    def count_text(self, text: str) -> int:
        from gen.backends.openai import count_text_tokens

        return count_text_tokens(text)

    def word_ids(self, word: str) -> list[int]:
        return []  # as the openai: backend: a server's own token ids are unknown here

    def render(self, messages: list[Message], continue_final: bool = False) -> str:
        return json.dumps(messages, ensure_ascii=False, indent=2)


def open_tokenizer(
    spec: str, context_window: int | None = None, dtype: str | None = None
) -> LocalPlanBackend | RemotePlanBackend:
    """The plan backend for a model spec: a local model's tokenizer and config (a GGUF's
    are written out on first use, as a run would; its weights are not converted), or
    tiktoken for `openai:` models. dtype: the run's (None: the model's own)."""
    from gen.models import resolve

    ms = resolve(spec)
    if ms.kind == "openai":
        from gen.backends.openai import DEFAULT_WINDOW

        return RemotePlanBackend(ms.name, context_window or DEFAULT_WINDOW)
    from gen.engine.config import EngineConfig
    from gen.models.loader import load_tokenizer, own_dtype, read_config
    from gen.models.store import prepare

    path = prepare(ms, weights=False)  # the tokenizer and config are all a plan reads
    tokenizer = load_tokenizer(path)
    window = read_config(path, tokenizer).max_position_embeddings
    return LocalPlanBackend(ms.name, window, tokenizer, dtype or own_dtype(ms, EngineConfig()))
