"""The Backend protocol: chat messages in, streamed text deltas out, rounds on request."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from gen.sampling import SamplingParams, TokenLogprob

Message = dict[str, Any]  # role, content; an assistant turn may carry tool_calls


@dataclass(slots=True)
class Delta:
    """A piece of streamed text; the last one of a round carries finish_reason and usage."""

    text: str
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    logprobs: list[TokenLogprob] = field(default_factory=list)  # the text's tokens, if asked
    retries: int = 0  # requests sent again (a remote server failed or dropped the stream)
    replica: str = ""  # the remote server that wrote the end of the round


class Stream(Protocol):
    """One generation. `deltas()` yields the current round's deltas; a round that ended
    with "length" can go on with `resume()` where the backend keeps state (kv); `close()`
    ends it and returns any text still held back."""

    def deltas(self) -> AsyncIterator[Delta]: ...

    async def resume(self, max_tokens: int) -> None: ...

    async def close(self) -> str: ...


class Backend(Protocol):
    name: str  # "local" | "openai"
    model: str
    context_window: int
    supports_kv: bool  # can a stream resume from its cache (the `kv` strategy)?
    # does it hold output to any constraint, one that starts past text already written too
    # (a `parse: list` section's grammar)? Others pass a section's `format:` on as they can
    supports_grammar: bool
    dtype: (
        str | None
    )  # the local engine's weights (float32, gguf, q8, int8); None for a remote server

    def count_tokens(self, messages: list[Message]) -> int: ...

    def count_text(self, text: str) -> int: ...

    def word_ids(self, word: str) -> list[int]:
        """The first token of `word` as it may appear (capitalised or not, after a space or
        not), for a logit_bias; [] where the server's token ids are unknown."""
        ...

    async def chat(
        self,
        messages: list[Message],
        params: SamplingParams,
        *,
        hold: bool = False,
        continue_final: bool = False,
    ) -> Stream: ...

    async def score(
        self, contexts: list[list[Message]], text: str, limit: int | None = None
    ) -> list[list[float]] | None:
        """Per conversation, the log-probability of each of text's tokens (its first
        `limit`) as the reply to it, or as the rest of its last message where that is the
        assistant's: the model's own judgement of a text (relevance.py reads it). None
        where the backend cannot score."""
        ...

    async def aclose(self) -> None: ...
