"""Model store: resolve model specs, convert and cache weights, load them for the engine.

The loader (and so torch) is imported on first use: resolving a spec and reading a model's
metadata, as `gen validate` does, stay light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gen.home import gen_home
from gen.models.store import BUNDLED_NAME, ModelSpec, check, context_length, prepare, resolve

if TYPE_CHECKING:
    from gen.models.loader import LoadedModel, load_model

__all__ = [
    "BUNDLED_NAME",
    "LoadedModel",
    "ModelSpec",
    "check",
    "context_length",
    "gen_home",
    "load_model",
    "prepare",
    "resolve",
]


def __getattr__(name: str) -> Any:
    if name in ("LoadedModel", "load_model"):
        from gen.models import loader

        return getattr(loader, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
