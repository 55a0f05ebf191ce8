"""Runs one Engine on its own thread; callers on any thread or event loop submit requests.

Every engine call happens on the driver thread, so the engine itself needs no locks.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from gen.engine import Engine, Output
from gen.engine.engine import EngineStats
from gen.sampling import SamplingParams

Deliver = Callable[[Output | BaseException], None]


class EngineDriver:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._commands: queue.Queue[tuple[str, tuple[Any, ...]]] = queue.Queue()
        self._listeners: dict[str, Deliver] = {}
        self._stopped = False
        self.stats = EngineStats()  # published by the driver thread, read from any
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
    ) -> None:
        self._commands.put(("add", (request_id, prompt_ids, params, deliver, hold)))

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
                continue
            try:
                outputs = self.engine.step()
            except Exception as exc:  # a failed step fails every request in flight
                for rid, deliver in list(self._listeners.items()):
                    try:
                        self.engine.abort(rid)
                    except Exception:
                        self.engine.requests.pop(rid, None)
                    deliver(exc)
                self._listeners.clear()
                self.engine.reset()
                continue
            for out in outputs:
                listener = self._listeners.get(out.request_id)
                if listener is not None and out.error is not None:
                    del self._listeners[out.request_id]  # it failed alone (its grammar)
                    listener(out.error)
                elif listener is not None:
                    try:
                        listener(out)
                    except Exception:  # a listener that cannot take it is gone: end its request
                        self._listeners.pop(out.request_id, None)
                        self.engine.abort(out.request_id)
                if out.finished and out.request_id not in self.engine.requests:
                    self._listeners.pop(out.request_id, None)

    def _run(self, name: str, args: tuple[Any, ...]) -> None:
        eng = self.engine
        if name == "add":
            rid, prompt_ids, params, deliver, hold = args
            try:
                eng.add_request(prompt_ids, params, request_id=rid, hold=hold)
            except Exception as exc:
                deliver(exc)
                return
            self._listeners[rid] = deliver
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
            deliver = self._listeners.pop(rid, None)
            if deliver is not None and name == "release":
                # whoever releases waits for this answer, even if the request was gone
                deliver(out or Output(rid, "", [], finished=True, finish_reason="length"))
        elif name == "call":
            fn, box = args
            try:
                box.put((True, fn(eng)))
            except Exception as exc:
                box.put((False, exc))

    def _fail(self, rid: str, exc: BaseException) -> None:
        deliver = self._listeners.pop(rid, None)
        if deliver is not None:
            deliver(exc)
