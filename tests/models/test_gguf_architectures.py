"""GGUF files of the newer architectures: a tiny random Qwen3, Gemma 3 and Llama with
Llama 3's rope scaling, written as llama.cpp's converter writes them (tests/tiny_models),
read through transformers' conversion of the metadata (what gen's store does) and
gen.models.gguf_weights, give transformers' logits on the numbers the file holds."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from gen.engine import ModelConfig, kernels
from gen.engine.kv_cache import KVCache
from gen.models.gguf_weights import gguf_config, load_gguf_model
from gen.models.loader import read_config
from tests import tiny_models
from tests.engine.test_architectures import GEMMA, LLAMA3, TEXT

# (transformers reads neither Gemma's query_pre_attn_scalar nor its softcap from a file)
GEMMA_FILE = {**GEMMA, "query_pre_attn_scalar": 256, "final_logit_softcapping": None}
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "qwen3": ("qwen3", {"head_dim": 32}),
    "gemma3": ("gemma3_text", GEMMA_FILE),
    "llama-rope-freqs": ("llama", {"rope_scaling": LLAMA3}),
}


@pytest.fixture(scope="module")
def k() -> ModuleType:
    if not kernels.supported():
        pytest.skip("not an AVX2 x86-64 CPU: dtype gguf runs on the kernels")
    loaded = kernels.load()
    assert loaded is not None, kernels.error()
    return loaded


@pytest.fixture(scope="module", params=list(CASES))
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """(the .gguf, the config gen reads for it, transformers' model on its numbers)."""
    kind, settings = CASES[request.param]
    root = tmp_path_factory.mktemp(request.param)
    reference = tiny_models.save(root / "hf", tiny_models.config(kind, **settings))
    path = root / "tiny.gguf"
    reference.load_state_dict(tiny_models.write_gguf(path, reference))
    return path, converted_config(path), reference


def converted_config(path: Path) -> ModelConfig:
    """The config as gen's store gets it: transformers reads the file's metadata, the
    result is saved as config.json and read back."""
    from transformers import AutoConfig

    out = path.parent / "converted"
    AutoConfig.from_pretrained(path.parent, gguf_file=path.name).save_pretrained(out)
    return read_config(out, tokenizer=None)


def test_the_files_tensors_give_transformers_logits(written: Any, k: ModuleType) -> None:
    path, cfg, reference = written
    model, counts = load_gguf_model(path, cfg, k)
    assert counts["Q8_0"] > 0 and counts["F16"] > 0  # blocks in place, float16 as stored
    ids = tiny_models.encode(TEXT)
    cache = KVCache(model.cfg, max_slots=1, max_len=len(ids))
    cache.reserve(1, len(ids))
    with torch.inference_mode():
        want = reference(torch.tensor([ids])).logits[0]
        got = model(
            torch.tensor([ids]), torch.arange(len(ids))[None], torch.tensor([0]), cache, True
        )
    torch.testing.assert_close(got[0], want, rtol=0, atol=1e-4)


def test_what_transformers_leaves_out_of_the_metadata_is_read_from_the_file(written: Any) -> None:
    """Llama 3's scaling is the rope_freqs tensor, Gemma 3's linear scaling two metadata
    keys (transformers' config has neither): they become the engine's; the head width is
    the file's key_length. Reading them again changes nothing."""
    path, cfg, reference = written
    full = gguf_config(path, cfg)
    assert gguf_config(path, full) == full
    assert full.head_dim == reference.config.head_dim
    kind = reference.config.model_type
    assert cfg.rope.kind == "default" and not cfg.rope.freq_factors
    if kind == "llama":
        assert full.rope.kind == "default" and len(full.rope.freq_factors) == full.head_dim // 2
        assert max(full.rope.freq_factors) == LLAMA3["factor"] and min(full.rope.freq_factors) == 1
    elif kind == "gemma3_text":
        assert (full.rope.kind, full.rope.factor, full.rope.theta) == ("linear", 4.0, 1e6)
        assert full.local_rope == cfg.local_rope and full.local_rope is not None
        assert (full.local_rope.kind, full.local_rope.theta) == ("default", 10_000.0)
        assert full.window(0) == GEMMA["sliding_window"] and full.window(5) is None
    else:
        assert full.rope == cfg.rope


def test_another_rope_scaling_in_a_file_is_refused(tmp_path: Path) -> None:
    from gguf import GGUFWriter, RopeScalingType

    from gen.errors import ModelError

    path = tmp_path / "yarn.gguf"
    writer = GGUFWriter(str(path), "qwen3")
    writer.add_rope_scaling_type(RopeScalingType.YARN)
    writer.add_rope_scaling_factor(4.0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    cfg = ModelConfig(vocab_size=8, hidden_size=64, intermediate_size=64, num_layers=1,
                      num_heads=2, num_kv_heads=2, head_dim=32)  # fmt: skip
    with pytest.raises(ModelError, match="rope scaling 'yarn' in a GGUF file is not run"):
        gguf_config(path, cfg)


def test_a_qwen3_file_is_read_as_qwen3(written: Any) -> None:
    path, cfg, reference = written
    saved = json.loads((path.parent / "converted" / "config.json").read_text("utf-8"))
    assert saved["model_type"] == reference.config.model_type
    assert cfg.qk_norm == (reference.config.model_type in ("qwen3", "gemma3_text"))
