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


UNSCORED = math.nan  # a prompt's first token: nothing comes before it to score it by


def completion_logprobs(
    placed: Sequence[tuple[TokenLogprob, int]], token_bytes: TokenBytes
) -> CompletionLogprobs:
    """Tokens with their text_offset (TextOffsets places them). Each top_logprobs entry
    holds the `logprobs` likeliest tokens and the sampled one (with `logprobs: 0`, only
    it), as vLLM answers; an UNSCORED token has null for both."""
    out = CompletionLogprobs()
    for item, offset in placed:
        token = _text(token_bytes, item.token_id)
        out.tokens.append(token)
        out.text_offset.append(offset)
        if math.isnan(item.logprob):
            out.token_logprobs.append(None)
            out.top_logprobs.append(None)
            continue
        out.token_logprobs.append(_finite(item.logprob))
        top = {_text(token_bytes, t): _finite(lp) for t, lp in item.top}
        top.setdefault(token, _finite(item.logprob))
        out.top_logprobs.append(top)
    return out


def _text(token_bytes: TokenBytes, token_id: int) -> str:
    return token_bytes(token_id).decode("utf-8", errors="replace")


def _leads(raw: bytes) -> int:
    """The characters that start in `raw` (its bytes that are no UTF-8 continuation)."""
    return sum(1 for b in raw if b & 0xC0 != 0x80)


class TextOffsets:
    """A text completion's tokens against the text sent. A token goes out with the text
    that holds all of its bytes, so a chunk's text is its tokens' text even where text was
    held back (the start of a possible stop string); its text_offset is the index, in the
    whole response, of the character its first byte is in. Exact where the tokens' bytes
    spell the text (byte-level BPE); a token whose bytes are not the text's next ones (a
    special token the text leaves out) goes out at once, taking what they share."""

    def __init__(self, token_bytes: TokenBytes, offset: int = 0) -> None:
        self.token_bytes = token_bytes
        self.pending: list[TokenLogprob] = []
        self.unclaimed = b""  # text sent that no token has taken yet
        self.chars = offset  # characters started before it

    def take(self, text: str, items: Sequence[TokenLogprob]) -> list[tuple[TokenLogprob, int]]:
        """The tokens whose text has now been sent, each with its offset."""
        self.pending += items
        self.unclaimed += text.encode("utf-8")
        placed = []
        while self.pending:
            raw = self.token_bytes(self.pending[0].token_id)
            if raw.startswith(self.unclaimed) and not self.unclaimed.startswith(raw):
                break  # its text is still held back
            placed.append((self.pending.pop(0), self._claim(raw)))
        return placed

    def rest(self) -> list[tuple[TokenLogprob, int]]:
        """At the end: the tokens whose text never came (a stop string's, cut)."""
        placed = [(item, self._claim(b"")) for item in self.pending]
        self.pending = []
        return placed

    def _claim(self, raw: bytes) -> int:
        n = 0
        for a, b in zip(raw, self.unclaimed, strict=False):
            if a != b:
                break
            n += 1
        claimed, self.unclaimed = self.unclaimed[:n], self.unclaimed[n:]
        inside = bool(claimed) and claimed[0] & 0xC0 == 0x80  # it starts inside a character
        offset = self.chars - inside
        self.chars += _leads(claimed)
        return offset
