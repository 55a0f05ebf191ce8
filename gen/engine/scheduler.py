"""Decides who runs in each step: admit waiting requests (prefill) and decode the running."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from gen.engine.sequence import Sequence, Status


@dataclass(slots=True)
class Plan:
    prefill: list[Sequence] = field(default_factory=list)
    decode: list[Sequence] = field(default_factory=list)


class Scheduler:
    def __init__(self, max_prefill_tokens: int) -> None:
        self.max_prefill_tokens = max_prefill_tokens
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.resuming: deque[Sequence] = deque()  # parked, another round asked for

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running or self.resuming)

    def plan(
        self,
        free_slots: int,
        admit: Callable[[Sequence], bool] = lambda _: True,
        fits: Callable[[], bool] = lambda: True,
    ) -> Plan:
        """Decode every running sequence whose prompt has been run; go on with the prompts
        still being run (a long one goes in chunks); admit waiting ones, in order, while
        there are free slots, prefill budget, and `admit(seq)` (KV memory) says yes.
        Resumed rounds rejoin first, in order, while `fits()` (KV memory) says yes."""
        while self.resuming and (fits() or not self.running):
            # (with nothing running nothing would free memory: go over rather than hang)
            self.running.append(self.resuming.popleft())
        plan = Plan(
            decode=[s for s in self.running if s.prefilled],
            prefill=[s for s in self.running if not s.prefilled],
        )
        if self.resuming:
            # a resumed round is waiting for memory: admit nobody, let the running finish
            return plan
        budget = self.max_prefill_tokens - sum(len(s.pending_ids()) for s in plan.prefill)
        admitted = 0
        while self.waiting and admitted < free_slots:
            seq = self.waiting[0]
            cost = len(seq.pending_ids())
            if plan.prefill and cost > budget:
                break
            if not admit(seq):
                break  # waits until running requests finish and free their memory
            self.waiting.popleft()
            seq.status = Status.RUNNING
            self.running.append(seq)
            plan.prefill.append(seq)
            admitted += 1
            budget -= cost
        return plan

    def resume(self, seq: Sequence) -> None:
        """A parked sequence (it keeps its slot) rejoins the decode batch, once it fits."""
        self.resuming.append(seq)

    def remove(self, seq: Sequence) -> None:
        for queue in (self.running, self.waiting, self.resuming):
            if seq in queue:
                queue.remove(seq)
