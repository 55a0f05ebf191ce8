"""Test doubles for the engine: a byte-level tokenizer, a tiny random Llama and a scripted model.

The scripted model emits a fixed token script per request, so stop-string and finish-reason
tests know exactly which text arrives in which token.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from gen.engine import LlamaModel, ModelConfig
from gen.engine.kv_cache import KVCache


class ByteTokenizer:
    """Ids 0..255 are raw bytes, then special tokens, then optional multi-byte `words`.

    Decoding concatenates the bytes (a special token adds its text unless skipped) and
    decodes them as UTF-8 with errors="replace". encode() is byte by byte; `ids()` turns
    pieces (a word, a single byte's text, or an id) into ids.
    """

    SPECIALS = ("<eos>", "<bos>", "<sep>")
    EOS = 256
    BOS = 257
    SEP = 258

    def __init__(self, words: Sequence[str] = ()) -> None:
        self.special_text = {256 + i: s for i, s in enumerate(self.SPECIALS)}
        self.words = list(dict.fromkeys(words))
        self.first_word = 256 + len(self.SPECIALS)
        self.eos_token_id = self.EOS
        self.bos_token_id = self.BOS

    @property
    def vocab_size(self) -> int:
        return self.first_word + len(self.words)

    def __len__(self) -> int:
        return self.vocab_size

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def ids(self, pieces: Sequence[str | int]) -> list[int]:
        """One id per piece: an int as is, a word's id, or the bytes of any other text."""
        out: list[int] = []
        for piece in pieces:
            if isinstance(piece, int):
                out.append(piece)
            elif piece in self.words:
                out.append(self.first_word + self.words.index(piece))
            else:
                out += self.encode(piece)
        return out

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = False) -> str:
        data = bytearray()
        for i in ids:
            if i < 256:
                data.append(i)
            elif i >= self.first_word:
                data += self.words[i - self.first_word].encode("utf-8")
            elif not skip_special_tokens:
                data += self.special_text[i].encode("ascii")
        return data.decode("utf-8", errors="replace")


class CountingTokenizer:
    """Wraps a tokenizer and counts decode() calls and the ids they were given."""

    def __init__(self, inner: ByteTokenizer) -> None:
        self.inner = inner
        self.calls = 0
        self.ids_decoded = 0

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = False) -> str:
        self.calls += 1
        self.ids_decoded += len(ids)
        return self.inner.decode(ids, skip_special_tokens=skip_special_tokens)


def tiny_config(vocab_size: int, max_position_embeddings: int = 512) -> ModelConfig:
    return ModelConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_layers=2,
        num_heads=4,
        num_kv_heads=2,
        head_dim=16,
        max_position_embeddings=max_position_embeddings,
        eos_token_ids=(ByteTokenizer.EOS,),
        bos_token_id=ByteTokenizer.BOS,
    )


def tiny_llama(seed: int = 0, max_position_embeddings: int = 512) -> LlamaModel:
    """A randomly initialised 2-layer Llama over the byte tokenizer's vocabulary."""
    torch.manual_seed(seed)
    return LlamaModel(tiny_config(ByteTokenizer().vocab_size, max_position_embeddings)).eval()


class RowModel:
    """The engine's model protocol (gen.engine.model_runner.CausalLM) for fakes that only
    run rows: forward_tokens is never taken."""

    split_prompts = False

    def takes_tokens(self, cache: KVCache) -> bool:
        return False

    def forward_tokens(self, *args: object, **kwargs: object) -> torch.Tensor:
        raise NotImplementedError(f"{type(self).__name__} runs rows only")


class ScriptedModel(RowModel):
    """Emits a token script per request, keyed on the prompt's first token.

    It follows LlamaModel's call signature. The request's key and prompt length are kept in
    the KV cache itself (position 0 of the slot), so they follow a slot when the cache
    compacts its rows. The script position is `positions[:, -1] - prompt_len + 1`; past the
    end of its script a request emits EOS. The scripted token gets the top logit and
    `fallback` the second, so when the script's token is banned (min_tokens) the request
    emits `fallback` instead.
    """

    def __init__(
        self,
        scripts: Mapping[int, Sequence[int]],
        vocab_size: int = ByteTokenizer().vocab_size,
        eos_id: int = ByteTokenizer.EOS,
        fallback: int = ord("_"),
        max_position_embeddings: int = 512,
    ) -> None:
        self.scripts = {k: list(v) for k, v in scripts.items()}
        self.eos_id = eos_id
        self.fallback = fallback
        self.cfg = ModelConfig(
            vocab_size=vocab_size,
            hidden_size=2,
            intermediate_size=2,
            num_layers=1,
            num_heads=1,
            num_kv_heads=1,
            head_dim=2,
            max_position_embeddings=max_position_embeddings,
            eos_token_ids=(eos_id,),
        )
        self.calls = 0

    def __call__(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        slots: torch.Tensor,
        cache: KVCache,
    ) -> torch.Tensor:
        self.calls += 1
        b, t = input_ids.shape
        prefill = positions[:, 0] == 0  # (B,) a request's first forward starts at position 0
        kv = torch.zeros(b, 1, t, 2)  # (B, KVH, T, D): (token id, prompt length)
        kv[:, 0, :, 0] = input_ids.float()
        kv[:, 0, 0, 1] = torch.where(prefill, float(t), 0.0)
        cache.write(0, slots, positions, kv, kv)
        keys, _ = cache.read(0, slots, int(positions.max()) + 1, contiguous=False)
        logits = torch.zeros(b, self.cfg.vocab_size)
        for row in range(b):
            key = int(keys[row, 0, 0, 0])
            prompt_len = int(keys[row, 0, 0, 1])
            step = int(positions[row, -1]) - prompt_len + 1
            script = self.scripts[key]
            token = script[step] if step < len(script) else self.eos_id
            logits[row, self.fallback] = 5.0
            logits[row, token] = 10.0
        return logits  # (B, vocab)
