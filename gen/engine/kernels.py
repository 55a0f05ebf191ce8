"""Fused float32 CPU kernels (csrc/kernels.cpp), compiled on first use.

What they buy, on the bundled model and a 2-core AVX2 machine: the matrix-vector
products of decoding one sequence run near the memory bus's speed (oneDNN's reach about
two thirds of it); RMSNorm (with the residual add), rotary, SiLU and attention over the
KV cache become one call each instead of five to ten small operations. Every kernel
computes an output row from its own input row in one fixed order, so batching never
changes a row's bits. The PyTorch forms they replace are in llama.py.

The build needs a C++ compiler (g++) and takes about a minute, once: the library is
cached under `$GEN_HOME/kernels/` (by default `~/.cache/gen/kernels/`), keyed by what
the build depends on. Where it cannot be built (no compiler, a CPU without AVX2 and
FMA), `load()` returns None, a warning says why, and the engine uses the PyTorch forms:
the same model, slower. `GEN_KERNELS=0` (EngineConfig.kernels) does that on purpose.

The same build holds AVX-512 versions of the matrix products, which the library picks
when it loads where the CPU and the OS take AVX-512 F, BW, VL and DQ (`isa()` says which
is in use; `GEN_KERNELS=avx2` keeps a process at AVX2, `use_isa()` switches). They give
the same bits as the AVX2 ones: each lane does its AVX2 lane's operations in order.
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import ModuleType

import torch

SOURCE = Path(__file__).with_name("csrc") / "kernels.cpp"
CFLAGS = ["-O3", "-mavx2", "-mfma", "-mf16c", "-ffp-contract=off", "-fopenmp"]
LDFLAGS = ["-fopenmp"]

log = logging.getLogger(__name__)

FAILED = "build-failed"  # in a build's folder: why it failed, so it is not tried again
_loaded: ModuleType | None = None
_tried = False
_error: str | None = None


def supported() -> bool:
    """An x86-64 CPU that PyTorch runs with AVX2 or better."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    return torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")


def build_dir() -> Path:
    """Keyed by everything the build command depends on: the source and its path, the
    flags, PyTorch, and the Python (virtual environment) it builds for."""
    from gen.home import gen_home

    parts = [SOURCE.read_bytes(), str(SOURCE).encode(), " ".join(CFLAGS + LDFLAGS).encode()]
    parts += [s.encode() for s in (torch.__version__, str(torch.__file__), sys.version, sys.prefix)]
    key = hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]
    return gen_home() / "kernels" / key


def load(retry: bool = False) -> ModuleType | None:
    """The compiled kernels, building them the first time; None where unavailable
    (`error()` says why, and a warning on the `gen.engine.kernels` logger). A build that
    failed is remembered for its build key and not tried again, and said once: later
    processes fall back quietly; `retry` (what `python -m gen.engine.kernels`, and so
    `make install`, does) tries again."""
    global _loaded, _tried, _error
    if _tried:
        return _loaded
    _tried = True
    if not supported():
        _error = "not an AVX2 x86-64 CPU"
        log.warning("gen: CPU kernels not in use (%s); PyTorch's operations run instead", _error)
        return None
    where = build_dir()
    failed = where / FAILED
    if retry:
        failed.unlink(missing_ok=True)
    elif failed.is_file() and not any(where.glob("*.so")):
        _error = failed.read_text(encoding="utf-8", errors="replace").strip()
        log.debug("gen: CPU kernels unavailable (their build failed before): %s", _error)
        return None
    try:
        from torch.utils.cpp_extension import load as build

        _find_ninja()
        where.mkdir(parents=True, exist_ok=True)
        with _build_lock(where):
            if not any(where.glob("*.so")):
                log.warning("gen: compiling the CPU kernels (once, about a minute) ...")
            _loaded = build(
                name=f"gen_kernels_{where.name}",
                sources=[str(SOURCE)],
                build_directory=str(where),
                extra_cflags=CFLAGS,
                extra_ldflags=LDFLAGS,
                verbose=False,
            )
    except Exception as exc:  # no compiler, no ninja, a build error: fall back
        _error = _reason(exc)
        log.warning(
            "gen: CPU kernels unavailable, PyTorch's operations run instead: %s "
            "(not tried again; `python -m gen.engine.kernels` retries)",
            _error,
        )
        _loaded = None
        with suppress(OSError):  # (a torn note is still a note: it only holds the reason)
            where.mkdir(parents=True, exist_ok=True)
            failed.write_text(_error + "\n", encoding="utf-8")
    return _loaded


def error() -> str | None:
    return _error


@contextmanager
def _build_lock(where: Path) -> Iterator[None]:
    """One build at a time per directory, across processes. PyTorch's own lock is a file
    that a killed build leaves behind, after which every later build waits forever; with
    this lock held nobody else is building, so such a file is stale and goes."""
    import fcntl

    with open(where / "gen.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            (where / "lock").unlink(missing_ok=True)
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _reason(exc: Exception) -> str:
    """The line of a failed build that says why (the compiler's error, a missing tool)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    telling = [line for line in lines if "error" in line.lower() or "not found" in line.lower()]
    line = telling[0] if telling else (lines[-1] if lines else "")
    return f"{type(exc).__name__}: {line[:300]}"


def _find_ninja() -> None:
    """PyTorch's builder runs `ninja` from PATH; the PyPI package's copy lives in the
    virtual environment, which is not on PATH when gen runs as .venv/bin/gen."""
    try:
        import ninja  # type: ignore[import-untyped]
    except ImportError:
        return
    path = os.environ.get("PATH", "")
    if ninja.BIN_DIR not in path.split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([ninja.BIN_DIR, path])


if __name__ == "__main__":  # `python -m gen.engine.kernels`: build now (make install does)
    logging.basicConfig(format="%(message)s")
    if load(retry=True) is None:
        sys.exit(1)
    print(f"gen: CPU kernels ready in {build_dir()}", file=sys.stderr)
