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
    A sliding-window layer's rows stop growing at its ring, `window + chunk - 1`
    positions (chunk: the most positions of one row a forward runs): position p sits at
    p % ring, so the ring holds the window of every token of a call. chunk None keeps
    every position of every layer (no rings).
    """

    def __init__(
        self,
        cfg: ModelConfig,
        max_slots: int,
        max_len: int,
        dtype: torch.dtype = torch.float32,
        grow_tokens: int = 256,
        budget_bytes: int | None = None,
        chunk: int | None = None,
    ) -> None:
        if max_slots < 1 or max_len < 1:
            raise ValueError(f"max_slots and max_len must be >= 1, got {max_slots}, {max_len}")
        self.cfg = cfg
        self.max_slots = max_slots
        self.max_len = max_len
        self.dtype = dtype
        self.grow_tokens = grow_tokens
        self.budget_bytes = budget_bytes  # None: bounded by max_slots x max_len only
        self.windows = [cfg.window(i) for i in range(cfg.num_layers)]
        # each layer's ring (None: it keeps every position)
        self.rings: list[int | None] = [
            w + chunk - 1 if w is not None and chunk is not None and w + chunk - 1 < max_len
            else None
            for w in self.windows
        ]  # fmt: skip
        self.slots = 0
        self.capacity = 0  # positions of the layers without a ring
        self.k: list[torch.Tensor] = []
        self.v: list[torch.Tensor] = []

    def bytes_per_token(self) -> int:
        """Bytes of one position in every layer (what a row costs per token, rings aside)."""
        return self.cfg.num_layers * self.bytes_per_position()

    def bytes_per_position(self) -> int:
        """Bytes of one position of one layer (its key and value)."""
        c = self.cfg
        return 2 * c.num_kv_heads * c.head_dim * torch.finfo(self.dtype).bits // 8

    def bytes_for(self, tokens: int) -> int:
        """Bytes of one row holding `tokens` positions, rings at most their size."""
        kept = sum(tokens if ring is None else min(tokens, ring) for ring in self.rings)
        return kept * self.bytes_per_position()

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.k, *self.v))

    def rounded(self, tokens: int) -> int:
        step = self.grow_tokens
        return min(self.max_len, -(-tokens // step) * step)

    def positions(self, layer: int, capacity: int) -> int:
        """The positions a row of `layer` holds when the cache holds `capacity`."""
        ring = self.rings[layer]
        return capacity if ring is None else min(capacity, ring)

    def fits(self, slots: int, tokens: int) -> bool:
        """Would `slots` rows of `tokens` positions stay within the memory budget?"""
        if slots > self.max_slots or tokens > self.max_len:
            return False
        if self.budget_bytes is None:
            return True
        return slots * self.bytes_for(self.rounded(tokens)) <= self.budget_bytes

    def serves(self, held: int, length: int) -> bool:
        """Can a row holding positions [0, held) (or a copy kept of it) give another row
        its first `length` positions? Where a layer's ring has passed over some, only if
        it still holds the window before `length`: what the next token sees."""
        if length > held:
            return False
        return all(
            ring is None or max(0, length - window + 1) >= max(0, held - ring)
            for ring, window in zip(self.rings, self.windows, strict=True)
            if window is not None
        )

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
        for store in (self.k, self.v):
            for i in range(self.cfg.num_layers):
                shape = (new_slots, self.cfg.num_kv_heads, self.positions(i, new_cap),
                         self.cfg.head_dim)  # fmt: skip
                if i < len(store) and store[i].shape == shape:
                    continue  # (a ring at its size, no new rows)
                new = torch.zeros(shape, dtype=self.dtype)
                if i < len(store):
                    old = store[i]
                    # (a ring grows only while no position has wrapped: p sits at p)
                    new[:kept, :, : old.shape[2]] = old[:kept]
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
        at = positions % self.k[layer].shape[2]  # (a ring's index; a position elsewhere)
        self.k[layer][rows, :, at] = k.transpose(1, 2)  # indexed as (B, T, H, D)
        self.v[layer][rows, :, at] = v.transpose(1, 2)

    def read(
        self, layer: int, slots: torch.Tensor, length: int, contiguous: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values (B, kv_heads, length, D), or a ring's all; a view when the
        slots are 0..B-1."""
        if contiguous:
            n = slots.shape[0]
            return self.k[layer][:n, :, :length], self.v[layer][:n, :, :length]
        return self.k[layer][slots, :, :length], self.v[layer][slots, :, :length]

    def copy_slot(self, src: int, dst: int, length: int) -> None:
        """Positions [0, length) of row src into row dst (a ring whole: what it holds of
        them is where dst reads it)."""
        for store in (self.k, self.v):
            for i, t in enumerate(store):
                if self.rings[i] is None:
                    t[dst, :, :length] = t[src, :, :length]
                else:
                    t[dst] = t[src]

    def gather(self, layer: int, slot: int, length: int) -> torch.Tensor:
        """What row `slot` of `layer` holds of positions [0, length), in order: keys and
        values (2, kv_heads, n, D), the last n = length or a ring's size of them."""
        k, v = self.k[layer][slot], self.v[layer][slot]
        size = k.shape[1]
        if self.rings[layer] is None or length <= size:
            return torch.stack((k[:, :length], v[:, :length]))
        at = torch.arange(length - size, length) % size
        return torch.stack((k[:, at], v[:, at]))

    def scatter(self, layer: int, slot: int, kv: torch.Tensor, first: int, length: int) -> None:
        """Positions [.., length) of kv (2, kv_heads, n, D), which holds positions
        [first, first + n), into row `slot` of `layer`: those the row has room for."""
        k, v = self.k[layer][slot], self.v[layer][slot]
        size = k.shape[1]
        if self.rings[layer] is None:  # (first is 0: everything kept)
            k[:, :length] = kv[0][:, :length]
            v[:, :length] = kv[1][:, :length]
            return
        at = torch.arange(max(first, length - size), length)
        k[:, at % size] = kv[0][:, at - first]
        v[:, at % size] = kv[1][:, at - first]


def common_prefix(a: Sequence[object], b: Sequence[object]) -> int:
    """How many leading items (ids, characters) a and b share."""
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
    store would pass `budget_bytes`. A sliding-window layer keeps what its ring held: an
    entry serves a prompt only where that still covers the window (KVCache.serves)."""

    def __init__(self, cache: KVCache, budget_bytes: int, min_tokens: int = 16) -> None:
        self.cache = cache
        self.budget_bytes = budget_bytes
        self.min_tokens = min_tokens
        # ids -> per layer (2, kv_heads, kept, head_dim): the last `kept` of len(ids)
        self.entries: OrderedDict[tuple[int, ...], list[torch.Tensor]] = OrderedDict()
        self.nbytes = 0

    def clear(self) -> None:
        self.entries.clear()
        self.nbytes = 0

    def put(self, ids: Sequence[int], slot: int) -> None:
        """Keep the first len(ids) positions of cache row `slot`, which hold `ids`."""
        n = len(ids)
        size = self.cache.bytes_for(n)
        if n < self.min_tokens or size > self.budget_bytes:
            return
        key = tuple(ids)
        serves = self.cache.serves
        for old in list(self.entries):
            shared = common_prefix(old, key)
            if shared == len(old) and serves(n, len(old)):  # the new entry covers an old one
                self._drop(old)
            elif shared == n and serves(len(old), n):  # an old entry already covers this one
                self.entries.move_to_end(old)
                return
        while self.entries and self.nbytes + size > self.budget_bytes:
            self._drop(next(iter(self.entries)))
        layers = range(self.cache.cfg.num_layers)
        self.entries[key] = [self.cache.gather(i, slot, n) for i in layers]
        self.nbytes += size

    def match(self, ids: Sequence[int]) -> tuple[tuple[int, ...] | None, int]:
        """The entry sharing the longest prefix with `ids` that it serves, and that length."""
        best: tuple[int, ...] | None = None
        length = 0
        for key in self.entries:
            n = common_prefix(key, ids)
            if n > length and self.cache.serves(len(key), n):
                best, length = key, n
        return best, length

    def load(self, key: tuple[int, ...], slot: int, length: int) -> None:
        """Copy the first `length` positions of entry `key` into cache row `slot`."""
        layers = self.entries[key]
        self.entries.move_to_end(key)
        for i, kv in enumerate(layers):
            self.cache.scatter(i, slot, kv, len(key) - kv.shape[2], length)

    def _drop(self, key: tuple[int, ...]) -> None:
        self.entries.pop(key)
        self.nbytes -= self.cache.bytes_for(len(key))


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
