"""Owns the model and its KV cache: rows, prefix copies, and the tensors of each step's
forward. What runs when is the scheduler's; the runner is its Memory."""

from __future__ import annotations

from typing import Protocol

import torch

from gen.engine.config import ModelConfig
from gen.engine.kv_cache import KVCache, PrefixStore, SlotManager, common_prefix
from gen.engine.sequence import Sequence


class CausalLM(Protocol):
    """What the engine runs: next-token logits from token ids at cache positions."""

    cfg: ModelConfig
    # prompt pieces and decoding rows in separate forwards even where forward_tokens runs
    split_prompts: bool

    def __call__(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        slots: torch.Tensor,
        cache: KVCache,
        all_logits: bool = False,
    ) -> torch.Tensor:
        """Rows of T tokens each, (B, T) ids and positions, (B,) cache rows; logits
        (B, vocab) after each row's last token, or with all_logits (B, T, vocab) after
        each of them."""
        ...

    def takes_tokens(self, cache: KVCache) -> bool:
        """Can forward_tokens run on this cache?"""
        ...

    def forward_tokens(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        slots: torch.Tensor,
        cache: KVCache,
        last: torch.Tensor,
        prompt: bool = True,
    ) -> torch.Tensor:
        """A ragged batch, token i at positions[i] of row slots[i] (all (N,)); logits
        (R, vocab) after the tokens at indices `last` (R,)."""
        ...


class ModelRunner:
    def __init__(
        self,
        model: CausalLM,
        max_slots: int,
        max_model_len: int,
        dtype: torch.dtype = torch.float32,
        kv_budget_bytes: int | None = None,
        prefix_cache_bytes: int = 0,
        chunk: int | None = None,
    ) -> None:
        """chunk: the most prompt positions of one row a step runs (the scheduler's
        budgets); sliding-window layers keep rings sized by it (KVCache)."""
        self.model = model
        self.cache = KVCache(
            model.cfg, max_slots, max_model_len, dtype, budget_bytes=kv_budget_bytes, chunk=chunk
        )
        self.slots = SlotManager(self.cache)
        self.prefixes = PrefixStore(self.cache, prefix_cache_bytes)
        self.scratch: KVCache | None = None  # scoring's own rows (see logprobs)

    @property
    def free_slots(self) -> int:
        return self.slots.free

    @property
    def min_shared(self) -> int:
        return self.prefixes.min_tokens if self.prefixes.budget_bytes > 0 else 0

    def holders(self) -> list[Sequence]:
        return [s for s in self.slots.owners if isinstance(s, Sequence)]

    def fits(self, rows: int, width: int) -> bool:
        return self.cache.fits(rows, width)

    def serves(self, held: int, length: int) -> bool:
        return self.cache.serves(held, length)

    # every cache mutation runs in inference mode: the cache holds inference tensors
    @torch.inference_mode()
    def assign_slot(self, seq: Sequence) -> None:
        seq.slot = self.slots.allocate(seq, len(seq.prompt_ids))

    @torch.inference_mode()
    def reuse_prefix(self, seq: Sequence) -> int:
        """Copy the longest run of the prompt's leading ids that another row or the prefix
        store holds into the sequence's row, where longer than what the row holds already
        (and at least the store's min_tokens); returns the row's cached length after. The
        last prompt id is always left to run, for its logits. Only before the sequence's
        own prompt starts running (a copy replaces its row's leading positions)."""
        if self.prefixes.budget_bytes <= 0 or seq.slot is None:
            return seq.num_cached
        wanted = seq.prompt_ids[:-1]
        row, length = -1, 0
        for slot, owner in enumerate(self.slots.owners):
            if isinstance(owner, Sequence) and owner is not seq and owner.num_cached:
                n = common_prefix(owner.history()[: owner.num_cached], wanted)
                if n > length and self.cache.serves(owner.num_cached, n):
                    row, length = slot, n
        key, stored = self.prefixes.match(wanted)
        best = max(length, stored)
        if best < self.prefixes.min_tokens or best <= seq.num_cached:
            return seq.num_cached
        self.slots.grow(seq.slot, best)
        if stored > length and key is not None:
            self.prefixes.load(key, seq.slot, stored)
        else:
            self.cache.copy_slot(row, seq.slot, length)
        seq.num_cached = best
        return best

    @torch.inference_mode()
    def release_slot(self, seq: Sequence) -> None:
        if seq.slot is None:
            return
        if self.prefixes.budget_bytes > 0 and seq.num_cached:
            self.prefixes.put(seq.history()[: seq.num_cached], seq.slot)

        def moved(owner: object, slot: int) -> None:
            assert isinstance(owner, Sequence)
            owner.slot = slot

        self.slots.release(seq.slot, moved)
        seq.slot = None

    def ragged(self) -> bool:
        """Do prompt pieces and decoding rows go through the model in one forward? The
        engine's LlamaModel takes them once its kernels are in use, unless it asks for
        prompts apart (int8)."""
        return self.model.takes_tokens(self.cache) and not self.model.split_prompts

    @torch.inference_mode()
    def run(self, pieces: list[tuple[Sequence, int]], decode: list[Sequence]) -> torch.Tensor:
        """Prompt pieces (a sequence and how many of its uncached prompt ids to run) and
        decoding sequences (their last token each); logits (len(pieces) + len(decode),
        vocab) after each piece's last id, then after each decoding row's token. One
        forward where the model takes ragged batches, else one per piece and one for
        the decoding rows."""
        if not self.ragged():
            rows = [self.prefill(seq, n) for seq, n in pieces]
            if decode:
                rows.append(self.decode(decode))
            return torch.cat(rows)
        ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        last: list[int] = []
        for seq, n in pieces:
            assert seq.slot is not None
            start = seq.num_cached
            self.slots.grow(seq.slot, start + n)
            ids += seq.pending_ids()[:n]
            positions += range(start, start + n)
            slots += [seq.slot] * n
            last.append(len(ids) - 1)
        for seq in decode:
            assert seq.slot is not None and seq.last_token is not None
            self.slots.grow(seq.slot, seq.num_cached + 1)
            ids.append(seq.last_token)
            positions.append(seq.num_cached)
            slots.append(seq.slot)
            last.append(len(ids) - 1)
        logits = self.model.forward_tokens(
            torch.tensor(ids),
            torch.tensor(positions),
            torch.tensor(slots),
            self.cache,
            torch.tensor(last),
            prompt=any(n > 1 for _, n in pieces),
        )
        for seq, n in pieces:
            seq.num_cached += n
        for seq in decode:
            seq.num_cached += 1
        return logits

    @torch.inference_mode()
    def prefill(self, seq: Sequence, limit: int | None = None) -> torch.Tensor:
        """Run the sequence's uncached prompt ids, at most `limit` of them; logits (1, vocab)
        after the last one run (the next token's, once the whole prompt has run)."""
        assert seq.slot is not None
        ids = seq.pending_ids()[:limit]
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

    @torch.inference_mode()
    def logprobs(self, rows: list[list[int]], starts: list[int]) -> list[torch.Tensor]:
        """Each row's log-probabilities of its ids from starts[i] on, each given every id
        before it: (len(row) - start,) per row (see scored_logits)."""
        return [
            torch.log_softmax(part.float(), dim=-1).gather(1, torch.tensor(row[start:])[:, None])[
                :, 0
            ]
            for part, row, start in zip(self.scored_logits(rows, starts), rows, starts, strict=True)
        ]

    @torch.inference_mode()
    def scored_logits(self, rows: list[list[int]], starts: list[int]) -> list[torch.Tensor]:
        """Each row's logits for its ids from starts[i] on, each given every id before it:
        (len(row) - start, vocab) per row. The rows run from position 0 in a scratch
        cache of their own, so the rows of sequences being decoded are neither read nor
        written; one forward for all of them where the model takes ragged batches."""
        cfg = self.model.cfg
        if self.scratch is None or self.scratch.max_slots < len(rows):
            self.scratch = KVCache(cfg, len(rows), self.cache.max_len, self.cache.dtype)
        scratch = self.scratch
        scratch.reserve(len(rows), max(len(r) for r in rows))
        if self.model.takes_tokens(scratch):
            ids: list[int] = []
            positions: list[int] = []
            slots: list[int] = []
            last: list[int] = []
            for slot, (row, start) in enumerate(zip(rows, starts, strict=True)):
                last += range(len(ids) + start - 1, len(ids) + len(row) - 1)
                ids += row
                positions += range(len(row))
                slots += [slot] * len(row)
            logits = self.model.forward_tokens(
                torch.tensor(ids),
                torch.tensor(positions),
                torch.tensor(slots),
                scratch,
                torch.tensor(last),
            )  # (scored ids, vocab)
            return list(logits.split([len(r) - s for r, s in zip(rows, starts, strict=True)]))
        return [
            self.model(
                torch.tensor([row[:-1]]),  # (1, T)
                torch.arange(len(row) - 1)[None, :],  # (1, T)
                torch.tensor([0]),
                scratch,
                all_logits=True,
            )[0, start - 1 :]  # (scored ids, vocab)
            for row, start in zip(rows, starts, strict=True)
        ]
