"""The engine driver thread: what a caller sees when a continuation round cannot run."""

from __future__ import annotations

import queue
from typing import Any

from gen.backends.driver import EngineDriver
from gen.engine import Engine, Output, SamplingParams
from tests.fakes import ByteTokenizer, tiny_llama


def test_a_resume_that_can_never_fit_fails_and_frees_the_row() -> None:
    tok = ByteTokenizer()
    probe = Engine(tiny_llama(), tok)
    per_token = probe.runner.cache.bytes_per_token()
    engine = Engine(tiny_llama(), tok, kv_budget_bytes=256 * per_token)
    driver = EngineDriver(engine)
    got: queue.Queue[Output | BaseException] = queue.Queue()
    try:
        params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
        driver.submit("r1", tok.encode("续写：春天 🌸"), params, got.put, hold=True)
        while True:
            out = got.get(timeout=60)
            assert isinstance(out, Output)
            if out.finished:
                break
        assert out.parked
        driver.resume("r1", 400)  # 400 more tokens never fit a 256-token budget
        err = got.get(timeout=60)
        assert isinstance(err, ValueError) and "whole budget" in str(err)
        # the parked row is gone and the engine is idle again
        state = driver.call(lambda e: (e.runner.slots.used, e.has_unfinished(), e.requests))
        assert state == (0, False, {})
    finally:
        driver.stop()


def test_a_listener_that_fails_ends_its_request_and_the_driver_goes_on() -> None:
    """A stream whose event loop has closed (an earlier asyncio.run) must not kill the
    driver thread: its request is ended and later requests still run."""
    tok = ByteTokenizer()
    driver = EngineDriver(Engine(tiny_llama(), tok))

    def gone(item: Output | BaseException) -> None:
        raise RuntimeError("Event loop is closed")

    got: queue.Queue[Output | BaseException] = queue.Queue()
    try:
        params = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
        driver.submit("dead", tok.encode("龙的故事 🐉"), params, gone)
        driver.submit("alive", tok.encode("春天 🌸"), params, got.put)
        while not (out := got.get(timeout=60)).finished:  # type: ignore[union-attr]
            pass
        assert isinstance(out, Output) and out.completion_tokens == 6
        assert driver.call(lambda e: (e.requests, e.runner.slots.used)) == ({}, 0)
    finally:
        driver.stop()


def test_a_steps_outputs_are_woken_as_the_next_step_starts_and_the_last_at_once() -> None:
    """Each step's outputs are delivered as it ends, but their listener is woken only as
    the next step's forward begins (the event loop then runs while the kernels do, not
    while the driver thread still holds the GIL); with no next step, at once."""
    tok = ByteTokenizer()
    engine = Engine(tiny_llama(), tok)
    events: list[str] = []
    step = engine.step

    def traced(scheduled: Any = None) -> list[Output]:
        def forward() -> None:
            events.append("forward")
            if scheduled is not None:
                scheduled()

        return step(scheduled=forward)

    engine.step = traced  # type: ignore[method-assign]
    driver = EngineDriver(engine)
    got: queue.Queue[Output | BaseException] = queue.Queue()

    def deliver(item: Output | BaseException) -> None:
        events.append("delivered")
        got.put(item)

    try:
        params = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)
        woken = lambda: events.append("woken")  # noqa: E731
        driver.submit("r", tok.encode("春天 🌸"), params, deliver, wake=woken)
        while not (out := got.get(timeout=60)).finished:  # type: ignore[union-attr]
            pass
        driver.call(lambda e: None)  # (the driver is past the last wake)
    finally:
        driver.stop()
    assert isinstance(out, Output) and out.completion_tokens == 4
    # prefill gives token 1, three decode steps tokens 2..4: each delivered as its step
    # ends, woken as the next one starts; the last woken with nothing after it
    assert events == (["forward", "delivered"] + ["forward", "woken", "delivered"] * 3 + ["woken"])
