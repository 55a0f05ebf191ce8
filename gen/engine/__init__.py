"""The decode engine: token ids in, text out. Knows nothing of YAML, templates or HTTP.

Its parts are imported on first use, so a torch-free module of it (`chat`) stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gen.sampling import SamplingParams

if TYPE_CHECKING:
    from gen.engine.config import ModelConfig
    from gen.engine.detokenizer import Detokenizer
    from gen.engine.engine import Completion, Engine
    from gen.engine.llama import LlamaModel
    from gen.engine.sequence import Output

__all__ = [
    "Completion",
    "Detokenizer",
    "Engine",
    "LlamaModel",
    "ModelConfig",
    "Output",
    "SamplingParams",
]

_HOMES = {
    "Completion": "engine",
    "Detokenizer": "detokenizer",
    "Engine": "engine",
    "LlamaModel": "llama",
    "ModelConfig": "config",
    "Output": "sequence",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"gen.engine.{home}"), name)
