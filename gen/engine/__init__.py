"""The decode engine: token ids in, text out. Knows nothing of YAML, templates or HTTP."""

from gen.engine.config import ModelConfig
from gen.engine.detokenizer import Detokenizer
from gen.engine.engine import Completion, Engine
from gen.engine.llama import LlamaModel
from gen.engine.sampling_params import SamplingParams
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
