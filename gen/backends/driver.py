"""Runs one Engine on its own thread; callers on any thread or event loop submit requests.

Every engine call happens on the driver thread, so the engine itself needs no locks.
What a step produced is handed to its listeners together: each listener's `wake`, if it
has one, is called once after all of a step's outputs went out (an event loop woken once
per step, not once per token of every stream), when the next step has been scheduled and
its forward begins, or at once if there is no next step.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any

from gen.engine import Engine, Output
from gen.engine.engine import EngineStats
from gen.engine.threads import release_pool
from gen.sampling import SamplingParams

Deliver = Callable[[Output | BaseException], None]
Wake = Callable[[], None]


class EngineDriver:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._commands: queue.Queue[tuple[str, tuple[Any, ...]]] = queue.Queue()
        self._listeners: dict[str, Deliver] = {}
        self._wakers: dict[str, Wake] = {}  # by request, for those submitted with one
        self._woken: set[Wake] = set()  # those to call once the step's outputs are out
        self._stopped = False
        self.stats = EngineStats()  # published by the driver thread, read from any
        # the engine's parallel loops run on the driver thread from now on: the workers
        # this thread started (loading the model) would make both pools sleep between
        # loops (gen.engine.threads)
        release_pool()
        self._thread = threading.Thread(target=self._loop, name="gen-engine", daemon=True)
        self._thread.start()

    # -- called from any thread ------------------------------------------------------------

    def submit(
        self,
        request_id: str,
        prompt_ids: list[int],
        params: SamplingParams,
        deliver: Deliver,
        hold: bool = False,
        wake: Wake | None = None,
    ) -> None:
        """Run a request; deliver(item) takes each output (or the error that ended it) on
        the driver thread, and wake(), if given, is called once a step's outputs have all
        been delivered (as the next step starts, or at once if none follows)."""
        self._commands.put(("add", (request_id, prompt_ids, params, deliver, hold, wake)))

    def resume(self, request_id: str, max_tokens: int) -> None:
        self._commands.put(("resume", (request_id, max_tokens)))

    def release(self, request_id: str) -> None:
        self._commands.put(("release", (request_id,)))

    def abort(self, request_id: str) -> None:
        self._commands.put(("abort", (request_id,)))

    def call(self, fn: Callable[[Engine], Any]) -> Any:
        """Run fn(engine) on the driver thread and wait for its result."""
        box: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=1)
        self._commands.put(("call", (fn, box)))
        ok, value = box.get()
        if not ok:
            raise value
        return value

    def stop(self) -> None:
        self._stopped = True
        self._commands.put(("noop", ()))
        self._thread.join(timeout=10)

    # -- the driver thread ---------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stopped:
            self.stats = self.engine.stats()
            block = not self.engine.has_unfinished()
            try:
                while True:
                    name, args = self._commands.get(block=block)
                    try:
                        self._run(name, args)
                    except Exception as exc:  # never let the driver thread die
                        self._fail(args[0] if args and isinstance(args[0], str) else "", exc)
                    block = False
            except queue.Empty:
                pass
            if self._stopped or not self.engine.has_unfinished():
                self._wake()
                continue
            try:
                # what the last step gave is handed over once this one is scheduled, as
                # the model starts: the event loop then takes it (and the GIL) while the
                # kernels run without the GIL, not while this thread still holds it (a
                # loop woken then waited for the GIL and woke again: three wake-ups a
                # token, each taking a core from the kernels' threads)
                outputs = self.engine.step(scheduled=self._wake)
            except Exception as exc:  # a failed step fails every request in flight
                for rid in list(self._listeners):
                    try:
                        self.engine.abort(rid)
                    except Exception:
                        self.engine.requests.pop(rid, None)
                    self._deliver(rid, exc, last=True)
                self.engine.reset()
                self._wake()
                continue
            for out in outputs:
                if out.error is not None:  # it failed alone (its grammar)
                    self._deliver(out.request_id, out.error, last=True)
                    continue
                gone = out.finished and out.request_id not in self.engine.requests
                self._deliver(out.request_id, out, last=gone)
            if not self.engine.has_unfinished():
                self._wake()  # (no next step to hand them over at)

    def _deliver(self, rid: str, item: Output | BaseException, last: bool) -> None:
        """Hand item to rid's listener (forgotten after its `last` item); a listener that
        cannot take it is gone, and its request is ended."""
        deliver = self._listeners.get(rid)
        if deliver is None:
            return
        wake = self._wakers.get(rid)
        if last:
            self._forget(rid)
        try:
            deliver(item)
        except Exception:
            self._forget(rid)
            if rid in self.engine.requests:
                self.engine.abort(rid)
            return
        if wake is not None:
            self._woken.add(wake)  # (an inbox's bound wake: equal for all its requests)

    def _forget(self, rid: str) -> None:
        self._listeners.pop(rid, None)
        self._wakers.pop(rid, None)

    def _wake(self) -> None:
        """Each listener that was given something since the last call, woken once."""
        woken, self._woken = self._woken, set()
        for wake in woken:
            with contextlib.suppress(Exception):  # (a waker ends its own requests if it must)
                wake()

    def _run(self, name: str, args: tuple[Any, ...]) -> None:
        eng = self.engine
        if name == "add":
            rid, prompt_ids, params, deliver, hold, wake = args
            self._listeners[rid] = deliver
            if wake is not None:
                self._wakers[rid] = wake
            try:
                eng.add_request(prompt_ids, params, request_id=rid, hold=hold)
            except Exception as exc:
                self._deliver(rid, exc, last=True)
        elif name == "resume":
            rid, max_tokens = args
            try:
                eng.resume(rid, max_tokens)
            except Exception as exc:
                eng.abort(rid)  # a round that cannot run frees the memory it holds
                self._fail(rid, exc)
        elif name in ("release", "abort"):
            (rid,) = args
            out = eng.release(rid) if name == "release" else eng.abort(rid)
            if name == "release":
                # whoever releases waits for this answer, even if the request was gone
                answer = out or Output(rid, "", [], finished=True, finish_reason="length")
                self._deliver(rid, answer, last=True)
            else:
                self._forget(rid)
        elif name == "call":
            fn, box = args
            try:
                box.put((True, fn(eng)))
            except Exception as exc:
                box.put((False, exc))

    def _fail(self, rid: str, exc: BaseException) -> None:
        self._deliver(rid, exc, last=True)
