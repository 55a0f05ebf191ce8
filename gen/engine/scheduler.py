"""Decides what runs in each step: which prompt pieces (a sequence and how many of its
prompt ids) and which decoding rows. It owns admission (free rows and KV memory), both
prefill budgets, and the rule that a prompt waits a step to copy a prefix that another
prompt in the step is about to compute."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

from gen.engine.kv_cache import common_prefix
from gen.engine.sequence import Sequence, Status


class Memory(Protocol):
    """What scheduling asks of the KV cache (the ModelRunner holds it)."""

    @property
    def free_slots(self) -> int: ...

    @property
    def min_shared(self) -> int:
        """The fewest leading prompt ids worth copying from another row; 0: prefix reuse
        is off."""
        ...

    def holders(self) -> list[Sequence]:
        """The sequences holding a row of the cache (running or parked)."""
        ...

    def fits(self, rows: int, width: int) -> bool:
        """Would `rows` rows of `width` positions each stay within the KV budget?"""
        ...

    def serves(self, held: int, length: int) -> bool:
        """Can a row holding `held` positions give another its first `length` (a
        sliding-window layer's ring may have passed over what that one would see)?"""
        ...

    def assign_slot(self, seq: Sequence) -> None: ...

    def reuse_prefix(self, seq: Sequence) -> int:
        """Copy the longest leading part of seq's prompt that the cache holds into its row;
        returns the row's cached length after."""
        ...


@dataclass(slots=True)
class Step:
    """One step's work: prompt pieces (a sequence, how many of its uncached prompt ids run
    now) and decoding rows (one token each), in the order of their cache rows."""

    prompts: list[tuple[Sequence, int]] = field(default_factory=list)
    decode: list[Sequence] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.prompts or self.decode)


class Scheduler:
    def __init__(self, memory: Memory, max_prefill_tokens: int, prefill_chunk: int) -> None:
        """While others decode, a step runs at most prefill_chunk prompt ids (a long prompt
        goes in chunks between decode steps); alone, up to max_prefill_tokens."""
        self.memory = memory
        self.max_prefill_tokens = max_prefill_tokens
        self.prefill_chunk = prefill_chunk
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.resuming: deque[Sequence] = deque()  # parked, another round asked for

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def resume(self, seq: Sequence) -> None:
        """A parked sequence (it keeps its row) rejoins the decode batch, once it fits."""
        self.resuming.append(seq)

    def remove(self, seq: Sequence) -> None:
        for queue in (self.running, self.waiting, self.resuming):
            if seq in queue:
                queue.remove(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running or self.resuming)

    def schedule(self) -> Step:
        """Every running sequence whose prompt has run decodes one token. Prompts still
        running go on (a long one in chunks), then waiting ones are admitted, in order,
        while there are free rows, prefill budget and KV memory. An admitted prompt first
        copies whatever leading part of it the cache holds."""
        self._rejoin()
        decode = [s for s in self.running if s.prefilled]
        prompts = [s for s in self.running if not s.prefilled]
        if not self.resuming:  # (a resumed round waiting for memory: admit nobody)
            prompts += self._admit(prompts)
        budget = self.prefill_chunk if decode else self.max_prefill_tokens
        pieces: list[tuple[Sequence, int]] = []
        for seq in prompts:
            if seq.slot is None:
                self.memory.assign_slot(seq)
            if seq.num_cached == seq.cached_prompt_tokens:  # its own prompt has not started
                seq.cached_prompt_tokens = self.memory.reuse_prefix(seq)
            if budget <= 0:
                continue  # its turn comes in a later step
            if self._shares_pending(seq, pieces):
                continue  # copy that piece's prefix next step rather than compute it too
            run = min(len(seq.pending_ids()), budget)
            pieces.append((seq, run))
            budget -= run
        decode.sort(key=lambda s: s.slot if s.slot is not None else -1)
        return Step(pieces, decode)

    def _rejoin(self) -> None:
        """Resumed rounds rejoin the running, in order, while the rows fit the KV budget
        (with nothing running nothing would free memory: go over rather than hang)."""
        while self.resuming and (self._fits() or not self.running):
            self.running.append(self.resuming.popleft())

    def _admit(self, running: list[Sequence]) -> list[Sequence]:
        """Waiting sequences admitted this step, beside the `running` prompts. The first
        is admitted whatever its length (it goes in chunks); later ones while their
        prompts fit the prefill budget."""
        admitted: list[Sequence] = []
        budget = self.max_prefill_tokens - sum(len(s.pending_ids()) for s in running)
        rows = len(self.memory.holders())
        widest = self._widest()
        while self.waiting and len(admitted) < self.memory.free_slots:
            seq = self.waiting[0]
            cost = len(seq.pending_ids())
            if (running or admitted) and cost > budget:
                break
            wider = max(widest, seq.reserved_tokens)
            if not self.memory.fits(rows + 1, wider):
                break  # waits until running requests finish and free their memory
            rows, widest = rows + 1, wider
            self.waiting.popleft()
            seq.status = Status.RUNNING
            self.running.append(seq)
            admitted.append(seq)
            budget -= cost
        return admitted

    def _widest(self) -> int:
        """The widest reservation among the rows holding KV memory: with one row per
        sequence, the dense cache needs (rows) x (widest) positions."""
        return max((s.reserved_tokens for s in self.memory.holders()), default=0)

    def _fits(self) -> bool:
        """Do the rows holding KV memory fit the budget at their widest reservation?"""
        holders = self.memory.holders()
        return self.memory.fits(len(holders), self._widest())

    def _shares_pending(self, seq: Sequence, pieces: list[tuple[Sequence, int]]) -> bool:
        """Will one of `pieces`, once run, hold a longer prefix of seq's prompt than seq
        has (by at least min_shared)? Then seq does better to wait a step and copy it
        than to compute it alongside."""
        least = self.memory.min_shared
        if least <= 0:
            return False
        wanted = seq.prompt_ids[:-1]
        for other, n in pieces:
            held = other.num_cached + n
            shared = common_prefix(other.prompt_ids[:held], wanted)
            if shared >= seq.num_cached + least and self.memory.serves(held, shared):
                return True
        return False
