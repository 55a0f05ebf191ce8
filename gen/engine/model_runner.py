"""Owns the model and its KV cache: turns scheduled sequences into one forward pass each."""

from __future__ import annotations

from typing import Protocol

import torch

from gen.engine.config import ModelConfig
from gen.engine.kv_cache import KVCache, SlotManager
from gen.engine.sequence import Sequence


class CausalLM(Protocol):
    cfg: ModelConfig

    def __call__(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        slots: torch.Tensor,
        cache: KVCache,
    ) -> torch.Tensor: ...


class ModelRunner:
    def __init__(
        self,
        model: CausalLM,
        max_slots: int,
        max_model_len: int,
        dtype: torch.dtype = torch.float32,
        kv_budget_bytes: int | None = None,
    ) -> None:
        self.model = model
        self.cache = KVCache(
            model.cfg, max_slots, max_model_len, dtype, budget_bytes=kv_budget_bytes
        )
        self.slots = SlotManager(self.cache)

    # every cache mutation runs in inference mode: the cache holds inference tensors
    @torch.inference_mode()
    def assign_slot(self, seq: Sequence) -> None:
        seq.slot = self.slots.allocate(seq, len(seq.prompt_ids))

    @torch.inference_mode()
    def release_slot(self, seq: Sequence) -> None:
        if seq.slot is None:
            return

        def moved(owner: object, slot: int) -> None:
            assert isinstance(owner, Sequence)
            owner.slot = slot

        self.slots.release(seq.slot, moved)
        seq.slot = None

    @torch.inference_mode()
    def prefill(self, seq: Sequence) -> torch.Tensor:
        """Run the sequence's uncached prompt ids; logits (1, vocab) for its next token."""
        assert seq.slot is not None
        ids = seq.pending_ids()
        start = seq.num_cached
        end = start + len(ids)
        self.slots.grow(seq.slot, end)
        logits = self.model(
            torch.tensor([ids]),  # (1, T)
            torch.arange(start, end)[None, :],  # (1, T)
            torch.tensor([seq.slot]),
            self.cache,
        )
        seq.num_cached = end
        return logits

    @torch.inference_mode()
    def decode(self, seqs: list[Sequence]) -> torch.Tensor:
        """Feed each sequence's last token at its own position; logits (B, vocab)."""
        slots = [s.slot for s in seqs]
        assert all(s is not None for s in slots)
        positions = [s.num_cached for s in seqs]
        for s in seqs:
            assert s.slot is not None
            self.slots.grow(s.slot, s.num_cached + 1)
        logits = self.model(
            torch.tensor([[s.last_token] for s in seqs]),  # (B, 1)
            torch.tensor(positions)[:, None],  # (B, 1)
            torch.tensor(slots),  # (B,)
            self.cache,
        )
        for s in seqs:
            s.num_cached += 1
        return logits
