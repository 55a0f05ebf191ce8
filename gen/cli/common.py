"""What the command modules share: the default model, the quiet environment, --dtype, and
what to do when stdout's reader goes away."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any

from gen.engine.config import DTYPES, EngineConfig


def quiet_libraries() -> None:
    """Libraries' chatter off. (Hugging Face's hub stays as the user set it: gen reads
    local files with local_files_only, and an hf: model spec may download.)"""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def default_model() -> str:
    return os.environ.get("GEN_MODEL", "smollm2-135m")


def add_dtype(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dtype",
        choices=list(DTYPES),
        default=None,
        help="weights and matrix arithmetic of the local engine (default: GEN_DTYPE, else "
        "the model's own: gguf for a .gguf file, float32 otherwise); int8 is faster on a CPU "
        "and changes the output",
    )


def engine_config(args: argparse.Namespace, **given: Any) -> EngineConfig:
    """The engine's settings for this command, built once here: its options (--dtype,
    and `given`), else the environment's (GEN_DTYPE, GEN_KERNELS, GEN_KV_BUDGET_MB,
    GEN_PREFIX_CACHE_MB)."""
    return EngineConfig.from_env(dtype=getattr(args, "dtype", None), **given)


def stdout_closed() -> int:
    """The reader of stdout went away (`| head`): what is still written there goes to
    /dev/null, so neither later writes nor the flush at exit fail again. Returns the exit
    code a SIGPIPE gives."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE
