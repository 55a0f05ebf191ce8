"""The OpenMP worker threads PyTorch's parallel loops (and gen's kernels) run on.

libgomp keeps a pool of workers for each thread that has started a parallel loop, and
while the workers of all pools outnumber the cores it makes every one of them sleep after
about a hundred spins instead of ~300,000. A process that loads a model on its main
thread (a pool of two on two cores) and then runs the engine on a driver thread (a
second pool) pays a futex sleep and wake-up per parallel loop, hundreds a forward: on 2
cores the 32-request mixed batch took 12-16 s on the driver thread against 7-10 s on the
main thread (about 100,000 voluntary context switches against none). Releasing the
loading thread's pool once the engine moves to its own thread keeps one pool, spinning.
"""

from __future__ import annotations

import ctypes
import logging
import re
from functools import cache

log = logging.getLogger(__name__)
OMP_PAUSE_SOFT = 1  # omp_pause_resource_t: the pool's threads end, they come back on use


@cache
def _libgomp() -> ctypes.CDLL | None:
    """The libgomp this process has loaded (PyTorch's own, on Linux), if any: opening it
    by its path again gives the same library, not a second copy."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = re.findall(r"\s(/\S*/libgomp[^/\s]*\.so[^/\s]*)$", maps.read(), re.M)
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
            lib.omp_pause_resource_all  # noqa: B018 (OpenMP 5.0's; old libgomps lack it)
        except (OSError, AttributeError):
            continue
        return lib
    return None


def release_pool() -> bool:
    """End the calling thread's OpenMP workers (omp_pause_resource_all, soft): a later
    parallel loop on this thread starts them again. False where the process runs no
    libgomp (another OpenMP, or none) or the call was refused (inside a parallel loop)."""
    lib = _libgomp()
    if lib is None:
        return False
    done = lib.omp_pause_resource_all(OMP_PAUSE_SOFT) == 0
    if not done:
        log.debug("libgomp refused to release this thread's workers")
    return done
