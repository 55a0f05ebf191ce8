"""KV memory: one dense row ("slot") per live sequence, kept compact so a decode batch is a view.

Only bookkeeping and copies live here; attention itself is in the model code.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

import torch

from gen.engine.config import ModelConfig


class KVCache:
    """Per-layer key and value tensors shaped (slots, kv_heads, capacity, head_dim).

    Both dimensions grow on demand (a copy, amortised), up to `max_slots` and `max_len`.
    """

    def __init__(
        self,
        cfg: ModelConfig,
        max_slots: int,
        max_len: int,
        dtype: torch.dtype = torch.float32,
        grow_tokens: int = 256,
        budget_bytes: int | None = None,
    ) -> None:
        if max_slots < 1 or max_len < 1:
            raise ValueError(f"max_slots and max_len must be >= 1, got {max_slots}, {max_len}")
        self.cfg = cfg
        self.max_slots = max_slots
        self.max_len = max_len
        self.dtype = dtype
        self.grow_tokens = grow_tokens
        self.budget_bytes = budget_bytes  # None: bounded by max_slots x max_len only
        self.slots = 0
        self.capacity = 0
        self.k: list[torch.Tensor] = []
        self.v: list[torch.Tensor] = []

    def bytes_per_token(self) -> int:
        c = self.cfg
        return 2 * c.num_layers * c.num_kv_heads * c.head_dim * torch.finfo(self.dtype).bits // 8

    def nbytes(self) -> int:
        return self.slots * self.capacity * self.bytes_per_token()

    def rounded(self, tokens: int) -> int:
        step = self.grow_tokens
        return min(self.max_len, -(-tokens // step) * step)

    def fits(self, slots: int, tokens: int) -> bool:
        """Would `slots` rows of `tokens` positions stay within the memory budget?"""
        if slots > self.max_slots or tokens > self.max_len:
            return False
        if self.budget_bytes is None:
            return True
        return slots * self.rounded(tokens) * self.bytes_per_token() <= self.budget_bytes

    def reserve(self, slots: int, tokens: int) -> None:
        """Make room for `slots` rows of `tokens` positions each. Rows past `slots` are
        unused: when the budget asks for it, a reallocation drops them."""
        if slots > self.max_slots or tokens > self.max_len:
            raise ValueError(
                f"KV cache request ({slots} slots x {tokens} tokens) exceeds "
                f"({self.max_slots} x {self.max_len})"
            )
        if slots <= self.slots and tokens <= self.capacity:
            return
        # grow only the dimension that is short, geometrically (amortised copies)
        # (never past the budget by growing ahead: fall back to exactly what was asked)
        new_slots = self.slots
        if slots > self.slots:
            new_slots = max(slots, min(self.max_slots, self.slots * 2))
            if not self.fits(new_slots, max(self.capacity, tokens)):
                new_slots = slots
        new_cap = self.capacity
        if tokens > self.capacity:
            new_cap = self.rounded(max(tokens, self.capacity + self.capacity // 2))
            if not self.fits(new_slots, new_cap):
                new_cap = self.rounded(tokens)
            if not self.fits(new_slots, new_cap):
                new_slots = slots
        kept = min(self.slots, new_slots)
        shape = (new_slots, self.cfg.num_kv_heads, new_cap, self.cfg.head_dim)
        for store in (self.k, self.v):
            for i in range(self.cfg.num_layers):
                new = torch.zeros(shape, dtype=self.dtype)
                if store and i < len(store):
                    new[:kept, :, : self.capacity] = store[i][:kept]
                    store[i] = new
                else:
                    store.append(new)
        self.slots, self.capacity = new_slots, new_cap

    def write(
        self,
        layer: int,
        slots: torch.Tensor,
        positions: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
    ) -> None:
        """Store k, v (B, kv_heads, T, D) at `positions` (B, T) of rows `slots` (B,)."""
        rows = slots[:, None]  # (B, 1)
        self.k[layer][rows, :, positions] = k.transpose(1, 2)  # indexed as (B, T, H, D)
        self.v[layer][rows, :, positions] = v.transpose(1, 2)

    def read(
        self, layer: int, slots: torch.Tensor, length: int, contiguous: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values (B, kv_heads, length, D); a view when the slots are 0..B-1."""
        if contiguous:
            n = slots.shape[0]
            return self.k[layer][:n, :, :length], self.v[layer][:n, :, :length]
        return self.k[layer][slots, :, :length], self.v[layer][slots, :, :length]

    def copy_slot(self, src: int, dst: int, length: int) -> None:
        """Positions [0, length) of row src into row dst."""
        for store in (self.k, self.v):
            for t in store:
                t[dst, :, :length] = t[src, :, :length]


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class PrefixStore:
    """Keys and values of finished sequences, kept so that a later prompt starting with the
    same ids (a system prompt, an outline, an earlier conversation) copies them instead of
    running them through the model again. Least recently used entries go first once the
    store would pass `budget_bytes`."""

    def __init__(self, cache: KVCache, budget_bytes: int, min_tokens: int = 16) -> None:
        self.cache = cache
        self.budget_bytes = budget_bytes
        self.min_tokens = min_tokens
        # ids -> (layers, 2, kv_heads, len(ids), head_dim)
        self.entries: OrderedDict[tuple[int, ...], torch.Tensor] = OrderedDict()
        self.nbytes = 0

    def clear(self) -> None:
        self.entries.clear()
        self.nbytes = 0

    def put(self, ids: Sequence[int], slot: int) -> None:
        """Keep the first len(ids) positions of cache row `slot`, which hold `ids`."""
        n = len(ids)
        size = n * self.cache.bytes_per_token()
        if n < self.min_tokens or size > self.budget_bytes:
            return
        key = tuple(ids)
        for old in list(self.entries):
            shared = common_prefix(old, key)
            if shared == len(old):  # the new entry covers an old one
                self._drop(old)
            elif shared == n:  # an old entry already covers this one
                self.entries.move_to_end(old)
                return
        while self.entries and self.nbytes + size > self.budget_bytes:
            self._drop(next(iter(self.entries)))
        kv = torch.stack(
            [
                torch.stack((self.cache.k[i][slot, :, :n], self.cache.v[i][slot, :, :n]))
                for i in range(self.cache.cfg.num_layers)
            ]
        )
        self.entries[key] = kv
        self.nbytes += size

    def match(self, ids: Sequence[int]) -> tuple[tuple[int, ...] | None, int]:
        """The entry sharing the longest prefix with `ids`, and that length."""
        best: tuple[int, ...] | None = None
        length = 0
        for key in self.entries:
            n = common_prefix(key, ids)
            if n > length:
                best, length = key, n
        return best, length

    def load(self, key: tuple[int, ...], slot: int, length: int) -> None:
        """Copy the first `length` positions of entry `key` into cache row `slot`."""
        kv = self.entries[key]
        self.entries.move_to_end(key)
        for i in range(self.cache.cfg.num_layers):
            self.cache.k[i][slot, :, :length] = kv[i, 0, :, :length]
            self.cache.v[i][slot, :, :length] = kv[i, 1, :, :length]

    def _drop(self, key: tuple[int, ...]) -> None:
        kv = self.entries.pop(key)
        self.nbytes -= kv.shape[3] * self.cache.bytes_per_token()


class SlotManager:
    """Hands out cache rows and keeps the used ones at 0..n-1 by moving the last into a hole."""

    def __init__(self, cache: KVCache) -> None:
        self.cache = cache
        self.owners: list[object] = []  # owners[slot] is the sequence in that row
        self.lengths: list[int] = []  # tokens held per row

    @property
    def used(self) -> int:
        return len(self.owners)

    @property
    def free(self) -> int:
        return self.cache.max_slots - self.used

    def allocate(self, owner: object, tokens: int) -> int:
        slot = self.used
        self.cache.reserve(slot + 1, tokens)
        self.owners.append(owner)
        self.lengths.append(0)
        return slot

    def grow(self, slot: int, tokens: int) -> None:
        self.cache.reserve(self.used, tokens)
        self.lengths[slot] = max(self.lengths[slot], tokens)

    def release(self, slot: int, on_move: Callable[[object, int], None]) -> None:
        """Release `slot`; the last row moves into it and `on_move(owner, new_slot)` is called."""
        last = self.used - 1
        if slot != last:
            self.cache.copy_slot(last, slot, self.lengths[last])
            self.owners[slot] = self.owners[last]
            self.lengths[slot] = self.lengths[last]
            on_move(self.owners[slot], slot)
        self.owners.pop()
        self.lengths.pop()
