"""The driver thread's parallel loops keep their worker spinning between loops: the
thread that built the engine (and started OpenMP workers of its own) lets its workers go,
so libgomp does not count more workers than cores and put every worker to sleep after
each loop (a futex sleep and wake-up per loop, hundreds per forward)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from gen.engine.threads import _libgomp

PROBE = textwrap.dedent(
    """
    import torch
    from gen.backends.driver import EngineDriver
    from gen.engine import Engine
    from tests.fakes import ByteTokenizer, tiny_llama

    torch.set_num_threads(2)
    x = torch.randn(4_000_000)
    for _ in range(10):
        x.add(1.0)  # this thread's own OpenMP workers, as loading a model starts them
    if RELEASE:
        driver = EngineDriver(Engine(tiny_llama(), ByteTokenizer()))
        run = driver.call
    else:  # the same work on another thread, with this thread's workers kept
        import threading
        def run(fn):
            out = []
            t = threading.Thread(target=lambda: out.append(fn(None)))
            t.start(); t.join()
            return out[0]

    def switches(_):
        def count():
            with open("/proc/thread-self/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        return int(line.split()[1])
        for _ in range(10):
            x.add(1.0)
        before = count()
        for _ in range(300):
            x.mul(1.0001)  # a parallel loop each, on two threads
        return count() - before

    print(run(switches))
    """
)


def _switches(release: bool) -> int:
    code = PROBE.replace("RELEASE", str(release))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    return int(done.stdout.split()[-1])


def test_the_driver_thread_does_not_sleep_between_parallel_loops() -> None:
    if _libgomp() is None:
        pytest.skip("this process runs no libgomp (another OpenMP, or none)")
    kept = _switches(release=False)
    released = _switches(release=True)
    # kept: the loops' worker slept after most of the 300 loops (200-300 here); released:
    # it spun from one loop to the next (0 here)
    assert kept >= 100 and released <= 20, (kept, released)
