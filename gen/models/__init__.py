"""Model store: resolve model specs, convert and cache weights, load them for the engine."""

from gen.models.loader import LoadedModel, load_model
from gen.models.store import BUNDLED_NAME, ModelSpec, gen_home, prepare, resolve

__all__ = [
    "BUNDLED_NAME",
    "LoadedModel",
    "ModelSpec",
    "gen_home",
    "load_model",
    "prepare",
    "resolve",
]
