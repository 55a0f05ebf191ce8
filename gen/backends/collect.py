"""One stream read to its end: text, finish_reason, stop_reason and usage, as `gen generate`
and a non-streaming HTTP answer report them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gen.backends.base import Delta, Stream
from gen.errors import BackendError
from gen.sampling import TokenLogprob


@dataclass(slots=True)
class Collected:
    text: str
    finish_reason: str
    stop_reason: int | str | None = None
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    logprobs: list[TokenLogprob] = field(default_factory=list)  # per token, if asked

    @property
    def usage(self) -> dict[str, object]:
        """OpenAI's usage object (cached prompt tokens under prompt_tokens_details)."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_prompt_tokens},
        }


async def collect(stream: Stream, on_text: Callable[[str], None] | None = None) -> Collected:
    """Read `stream` to its end and close it; `on_text` sees each piece of text as it comes.
    Raises BackendError when the stream ends without a finish reason."""
    text: list[str] = []
    logprobs: list[TokenLogprob] = []
    final: Delta | None = None
    try:
        async for d in stream.deltas():
            if d.text:
                text.append(d.text)
                if on_text is not None:
                    on_text(d.text)
            logprobs += d.logprobs
            if d.finish_reason is not None:
                final = d
    finally:
        tail = await stream.close()
    if tail:  # a parked round's text still held back
        text.append(tail)
        if on_text is not None:
            on_text(tail)
    if final is None:
        raise BackendError("the completion ended without a finish reason")
    return Collected(
        "".join(text),
        final.finish_reason or "stop",
        final.stop_reason,
        final.prompt_tokens,
        final.cached_prompt_tokens,
        final.completion_tokens,
        logprobs,
    )
