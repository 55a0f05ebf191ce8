"""Fused float32 CPU kernels (csrc/kernels.cpp), compiled on first use, with the PyTorch
forms they replace.

What they buy, on the bundled model and a 2-core AVX2 machine: the matrix-vector
products of decoding one sequence run near the memory bus's speed (oneDNN's reach about
two thirds of it), and RMSNorm, rotary and SiLU become one call each instead of five to
ten small operations. Every kernel computes an output row from its own input row in one
fixed order, so batching never changes a row's bits.

The build needs a C++ compiler (g++) and takes about a minute, once: the library is
cached under `$GEN_HOME/kernels/` (by default `~/.cache/gen/kernels/`), keyed by the
source, the flags and the PyTorch version. Where it cannot be built (no compiler, a CPU
without AVX2 and FMA) or `GEN_KERNELS=0` is set, `load()` returns None and the engine
uses the PyTorch forms: the same model, somewhat slower.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
from pathlib import Path
from types import ModuleType

import torch

SOURCE = Path(__file__).with_name("csrc") / "kernels.cpp"
CFLAGS = ["-O3", "-mavx2", "-mfma", "-ffp-contract=off", "-fopenmp"]
LDFLAGS = ["-fopenmp"]

_loaded: ModuleType | None = None
_tried = False
_error: str | None = None


def supported() -> bool:
    """An x86-64 CPU that PyTorch runs with AVX2 or better, and not switched off."""
    if os.environ.get("GEN_KERNELS", "1") == "0":
        return False
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    return torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")


def build_dir() -> Path:
    from gen.models.store import gen_home

    key = hashlib.sha256(
        SOURCE.read_bytes() + " ".join(CFLAGS + LDFLAGS).encode() + torch.__version__.encode()
    ).hexdigest()[:16]
    return gen_home() / "kernels" / key


def load() -> ModuleType | None:
    """The compiled kernels, building them the first time; None where unavailable
    (`error()` says why)."""
    global _loaded, _tried, _error
    if _tried:
        return _loaded
    _tried = True
    if not supported():
        _error = "switched off (GEN_KERNELS=0) or not an AVX2 x86-64 CPU"
        return None
    try:
        from torch.utils.cpp_extension import load as build

        _find_ninja()
        where = build_dir()
        where.mkdir(parents=True, exist_ok=True)
        if not any(where.glob("*.so")):
            print("gen: compiling the CPU kernels (once, about a minute) ...", file=sys.stderr)
        _loaded = build(
            name=f"gen_kernels_{where.name}",
            sources=[str(SOURCE)],
            build_directory=str(where),
            extra_cflags=CFLAGS,
            extra_ldflags=LDFLAGS,
            verbose=False,
        )
    except Exception as exc:  # no compiler, no ninja, a build error: fall back
        _error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1:] or ''}"
        print(f"gen: CPU kernels unavailable, using PyTorch's ({_error})", file=sys.stderr)
        _loaded = None
    return _loaded


def error() -> str | None:
    return _error


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
    if load() is None:
        print(f"gen: CPU kernels not built: {error()}", file=sys.stderr)
        sys.exit(1)
    print(f"gen: CPU kernels ready in {build_dir()}", file=sys.stderr)
