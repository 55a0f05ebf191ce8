"""The engine's per-token log probabilities in OpenAI's two shapes: chat's `content` list
and the text completion's parallel lists."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from gen.sampling import TokenLogprob
from gen.server.openai.responses import (
    ChoiceLogprobs,
    CompletionLogprobs,
    TokenLogprobContent,
    TopLogprob,
)

FLOOR = -9999.0  # OpenAI's stand-in for a probability that underflows to 0

TokenBytes = Callable[[int], bytes]


def _finite(value: float) -> float:
    return value if math.isfinite(value) else FLOOR


def _top(token_bytes: TokenBytes, token_id: int, logprob: float) -> TopLogprob:
    raw = token_bytes(token_id)
    return TopLogprob(
        token=raw.decode("utf-8", errors="replace"), logprob=_finite(logprob), bytes=list(raw)
    )


def chat_logprobs(items: Sequence[TokenLogprob], token_bytes: TokenBytes) -> ChoiceLogprobs:
    content = []
    for item in items:
        chosen = _top(token_bytes, item.token_id, item.logprob)
        content.append(
            TokenLogprobContent(
                **chosen.model_dump(),
                top_logprobs=[_top(token_bytes, t, lp) for t, lp in item.top],
            )
        )
    return ChoiceLogprobs(content=content)


def completion_logprobs(
    items: Sequence[TokenLogprob], token_bytes: TokenBytes, offset: int = 0
) -> CompletionLogprobs:
    """`offset`: characters of text before these tokens (text_offset counts from there).
    Each top_logprobs entry holds the `logprobs` likeliest tokens and the sampled one (with
    `logprobs: 0`, only it), as vLLM answers."""
    out = CompletionLogprobs()
    for item in items:
        token = _text(token_bytes, item.token_id)
        out.tokens.append(token)
        out.token_logprobs.append(_finite(item.logprob))
        top = {_text(token_bytes, t): _finite(lp) for t, lp in item.top}
        top.setdefault(token, _finite(item.logprob))
        out.top_logprobs.append(top)
        out.text_offset.append(offset)
        offset += len(token)
    return out


def _text(token_bytes: TokenBytes, token_id: int) -> str:
    return token_bytes(token_id).decode("utf-8", errors="replace")
