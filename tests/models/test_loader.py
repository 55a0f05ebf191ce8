"""Loading the bundled model: the engine's config, weights and tokenizer agree."""

from __future__ import annotations

from typing import Any

import pytest

from gen.engine import LlamaModel
from gen.models import BUNDLED_NAME, gen_home

pytestmark = pytest.mark.real_model


def test_bundled_model_loads(real_model: Any) -> None:
    assert real_model.name == BUNDLED_NAME
    assert isinstance(real_model.model, LlamaModel)
    cfg = real_model.config
    assert cfg.vocab_size == len(real_model.tokenizer)
    assert real_model.tokenizer.eos_token_id in cfg.eos_token_ids
    assert real_model.context_window == cfg.max_position_embeddings == 8192
    assert not any(p.is_meta for p in real_model.model.parameters())
    assert real_model.model.lm_head.weight is real_model.model.embed_tokens.weight  # tied


def test_bundled_model_is_cached_under_gen_home(real_model: Any) -> None:
    assert real_model.path.parent == gen_home() / "models"
    assert (real_model.path / "model.safetensors").is_file()
