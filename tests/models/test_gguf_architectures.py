"""GGUF files of the newer architectures: a tiny random Qwen3, Gemma 3, Llama with Llama
3's rope scaling, Mistral with a sliding window and SmolLM3, written as llama.cpp's
converter writes them (tests/tiny_models), converted as gen's store converts them (the
metadata through transformers, SmolLM3's by gen.models.convert) and read by
gen.models.gguf_weights, give transformers' logits on the numbers the file holds, on a
prompt longer than the window."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from gen.engine import Engine, ModelConfig, SamplingParams, kernels
from gen.engine.config import EngineConfig
from gen.engine.kv_cache import KVCache
from gen.models import load_model
from gen.models.convert import convert_gguf
from gen.models.gguf_weights import gguf_config, load_gguf_model
from gen.models.loader import read_config
from tests import tiny_models
from tests.engine.test_architectures import GEMMA, LLAMA3, TEXT, WINDOW, reference_greedy
from tests.models import ggufs

# (a Gemma 3 file holds no query_pre_attn_scalar: llama.cpp scales by the head width; nor
# a softcap)
GEMMA_FILE = {**GEMMA, "query_pre_attn_scalar": 32, "final_logit_softcapping": None}
# the config gguf_config completes in the tests that read a file's metadata alone
METADATA_ONLY = ModelConfig(vocab_size=8, hidden_size=64, intermediate_size=64, num_layers=1,
                            num_heads=2, num_kv_heads=2, head_dim=32)  # fmt: skip
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "qwen3": ("qwen3", {"head_dim": 32}),
    "gemma3": ("gemma3_text", GEMMA_FILE),
    "llama-rope-freqs": ("llama", {"rope_scaling": LLAMA3}),
    "mistral-window": ("mistral", {"sliding_window": WINDOW}),
    "smollm3": ("smollm3", {"num_hidden_layers": 5}),  # layer 3 without rotary
    # YaRN as llama.cpp's converter writes Qwen's: type, factor, original context
    "qwen3-yarn": (
        "qwen3",
        {
            "head_dim": 32,
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 64,
            },
        },
    ),
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
    """The config as gen's store gets it: the file's tokenizer and config converted
    (`dtype gguf` reads the weights from the file) and read back."""
    out = path.parent / "converted"
    out.mkdir()
    convert_gguf(path, out, weights=False)
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
    """Llama 3's scaling is the rope_freqs tensor, Gemma 3's linear scaling and Qwen's YaRN
    metadata keys, a Llama file's sliding window another (transformers' config has none):
    they become the engine's; the head width is the file's key_length, Gemma 3's query
    scale llama.cpp's; SmolLM3's fourth layer has no rotary. Reading them again changes
    nothing."""
    path, cfg, reference = written
    full = gguf_config(path, cfg)
    assert gguf_config(path, full) == full
    hf = reference.config
    even = hf.hidden_size // hf.num_attention_heads
    assert full.head_dim == (getattr(hf, "head_dim", None) or even)
    kind = reference.config.model_type
    assert cfg.rope.kind == "default" and not cfg.rope.freq_factors
    windows = [full.window(i) for i in range(full.num_layers)]
    if kind == "llama":
        assert full.rope.kind == "default" and len(full.rope.freq_factors) == full.head_dim // 2
        assert max(full.rope.freq_factors) == LLAMA3["factor"] and min(full.rope.freq_factors) == 1
    elif kind == "gemma3_text":
        assert (full.rope.kind, full.rope.factor, full.rope.theta) == ("linear", 4.0, 1e6)
        assert full.local_rope == cfg.local_rope and full.local_rope is not None
        assert (full.local_rope.kind, full.local_rope.theta) == ("default", 10_000.0)
        assert full.window(0) == GEMMA["sliding_window"] and full.window(5) is None
        assert cfg.attention_scale == 256**-0.5 and full.attention_scale == 32**-0.5
    elif hf.rope_parameters.get("rope_type") == "yarn":
        yarn = (full.rope.kind, full.rope.factor, full.rope.original_max_position_embeddings)
        assert yarn == ("yarn", 4.0, 64) and full.rope.attention_factor is None
    else:
        assert full.rope == cfg.rope
    if kind == "mistral":
        assert cfg.window(0) is None and windows == [WINDOW] * full.num_layers
    elif kind != "gemma3_text":
        assert windows == [None] * full.num_layers
    assert full.no_rope_layers == ((3,) if kind == "smollm3" else ())


def test_gemma3_27bs_queries_are_scaled_as_llama_cpp_scales_them(tmp_path: Path) -> None:
    """The 27B (62 layers) by hidden / heads, 168, not by its head width, 128."""
    path = ggufs.write_gguf(tmp_path / "wide.gguf", arch="gemma3")  # (its metadata is read)
    cfg = ModelConfig(vocab_size=8, hidden_size=5376, intermediate_size=64, num_layers=62,
                      num_heads=32, num_kv_heads=16, head_dim=128)  # fmt: skip
    assert gguf_config(path, cfg).attention_scale == 168**-0.5
    narrow = gguf_config(path, replace(cfg, num_layers=26))
    assert narrow.attention_scale == 128**-0.5


def test_another_rope_scaling_in_a_file_is_refused(tmp_path: Path) -> None:
    from gen.errors import ModelError

    longrope = {"{arch}.rope.scaling.type": "longrope", "{arch}.rope.scaling.factor": 4.0}
    path = ggufs.write_gguf(tmp_path / "long.gguf", arch="qwen3", metadata=longrope)
    with pytest.raises(ModelError, match="rope scaling 'longrope' in a GGUF file is not run"):
        gguf_config(path, METADATA_ONLY)


@pytest.mark.parametrize(
    ("metadata", "kind", "factor"),
    [({"{arch}.rope.scaling.factor": 2.0}, "linear", 2.0),  # llama.cpp: linear when untyped
     ({"{arch}.rope.scale_linear": 3.0}, "linear", 3.0),  # its older key
     ({"{arch}.rope.scaling.type": "yarn", "{arch}.rope.scaling.factor": 1.0}, "default", 1.0),
     ({"{arch}.rope.scaling.type": "none", "{arch}.rope.scaling.factor": 8.0}, "default", 1.0)],
    ids=["untyped", "scale_linear", "yarn of 1", "none"],
)  # fmt: skip
def test_a_files_rope_scaling_is_read_as_llama_cpp_reads_it(
    tmp_path: Path, metadata: dict[str, object], kind: str, factor: float
) -> None:
    path = ggufs.write_gguf(tmp_path / "r.gguf", arch="qwen3", metadata=metadata)
    rope = gguf_config(path, METADATA_ONLY).rope
    assert (rope.kind, rope.factor) == (kind, factor)


def test_a_qwen3_file_is_read_as_qwen3(written: Any) -> None:
    path, cfg, reference = written
    saved = json.loads((path.parent / "converted" / "config.json").read_text("utf-8"))
    kind = reference.config.model_type
    assert saved["model_type"] == ("llama" if kind == "mistral" else kind)  # llama.cpp's name
    assert cfg.qk_norm == (reference.config.model_type in ("qwen3", "gemma3_text"))


@pytest.mark.parametrize("dtype", ["gguf", "float32"])
@pytest.mark.parametrize("name", ["smollm3", "mistral-window"])
def test_a_file_runs_as_a_user_runs_it(
    name: str, dtype: str, tmp_path: Path, gen_home: Path, k: ModuleType
) -> None:
    """The file's path given to the engine, as `gen generate --model FILE` gives it: its
    tokenizer is the bytes one, and greedy decoding from prompts of 40 and 70 tokens
    (prompts in chunks of 16, across Mistral's window of 16) gives transformers' tokens,
    on the file's own blocks and on the float32 conversion (SmolLM3's weights read by
    gen, as transformers reads none of a SmolLM3 file)."""
    kind, settings = CASES[name]
    reference = tiny_models.save(tmp_path / "hf", tiny_models.config(kind, **settings))
    path = tmp_path / f"{name}.gguf"
    reference.load_state_dict(tiny_models.write_gguf(path, reference))
    loaded = load_model(str(path), EngineConfig(dtype=dtype))
    assert loaded.dtype == dtype
    ids = tiny_models.encode(TEXT)
    assert loaded.tokenizer.encode(TEXT, add_special_tokens=False) == ids
    engine = Engine(loaded.model, loaded.tokenizer, max_prefill_tokens=16, prefill_chunk=16)
    prompts = [ids[:40], ids[:70]]
    params = SamplingParams(temperature=0, max_tokens=30, ignore_eos=True)
    for prompt, done in zip(prompts, engine.generate(prompts, params), strict=True):
        assert done.token_ids == reference_greedy(reference, prompt, 30)
