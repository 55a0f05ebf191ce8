"""Incremental detokenization: token ids in, only complete, stable text out.

Each push decodes a short window of recent ids (never the whole text), so the cost per
token is O(1) amortised; the concatenation of every push plus `flush()` equals
`tokenizer.decode(all_generated_ids, skip_special_tokens=...)`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

REPLACEMENT = "\ufffd"
# ids kept before the read point so tokenizers that drop a word's leading space when it
# starts a decode (SentencePiece) still see the context that keeps it.
CONTEXT_IDS = 6


class Tokenizer(Protocol):
    def decode(self, ids: list[int], *, skip_special_tokens: bool = ...) -> str: ...


class Detokenizer:
    def __init__(
        self,
        tokenizer: Tokenizer,
        prompt_ids: Sequence[int] = (),
        skip_special_tokens: bool = True,
    ) -> None:
        self.tokenizer = tokenizer
        self.skip_special_tokens = skip_special_tokens
        context = list(prompt_ids[-CONTEXT_IDS:])
        # a prompt that ends inside a character: leave those ids out of the context, so the
        # generated rest decodes on its own as in decode(generated_ids) instead of never
        # matching the context's text (which would hold back every delta until flush()).
        while context and self._decode(context).endswith(REPLACEMENT):
            context.pop()
        self.ids: list[int] = context  # the window: released context ids, then pending ids
        self.read_offset = len(context)  # ids before this were already released

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=self.skip_special_tokens)

    def push(self, token_ids: Iterable[int]) -> str:
        """Add ids; return the text that is now final (never half a character)."""
        new = list(token_ids)
        if not new:
            return ""
        self.ids.extend(new)
        prefix_text = self._decode(self.ids[: self.read_offset])
        full_text = self._decode(self.ids)
        if full_text == prefix_text:
            # the new ids show nothing (skipped special tokens): drop them, so a long run
            # of them (ignore_eos) doesn't grow the window and every decode with it.
            del self.ids[self.read_offset :]
            return ""
        if full_text.endswith(REPLACEMENT) or len(full_text) <= len(prefix_text):
            # an incomplete UTF-8 sequence at the end, or nothing visible yet: wait.
            return ""
        if not full_text.startswith(prefix_text):
            # the context decodes differently once more ids follow (rare): emit nothing
            # now and let flush() settle the difference.
            return ""
        delta = full_text[len(prefix_text) :]
        # slide the window: the released ids become the next decode's context.
        del self.ids[: self.read_offset]
        self.read_offset = len(self.ids)
        return delta

    def flush(self) -> str:
        """Whatever is left at the end of a generation, replacement characters included."""
        prefix_text = self._decode(self.ids[: self.read_offset])
        full_text = self._decode(self.ids)
        self.ids.clear()
        self.read_offset = 0
        return full_text[len(prefix_text) :]
