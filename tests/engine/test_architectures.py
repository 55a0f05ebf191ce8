"""Each architecture the engine runs, held to transformers on a tiny random model of it
(tests/tiny_models.py): Llama with each rope scaling, Qwen3, Mistral and Qwen2 with
sliding windows, Gemma 3 and SmolLM3. The logits at every position of a prompt longer
than the window agree within 1e-4 (float32), through the PyTorch forms, the kernels'
per-layer loop and their one-call `layers`; greedy decoding across the window's edge
gives transformers' tokens."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from gen.engine import Engine, SamplingParams
from gen.engine.config import EngineConfig
from gen.engine.kv_cache import KVCache
from gen.models import load_model
from tests import tiny_models

LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 32}  # fmt: skip
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
        "beta_fast": 16.0, "mscale": 1.0, "mscale_all_dim": 0.5}  # fmt: skip
WINDOW = 16
GEMMA = {
    "num_hidden_layers": 7,  # five sliding layers, a global one, a sliding one
    "sliding_window": WINDOW,
    "rope_scaling": {"rope_type": "linear", "factor": 4.0},  # the global layers'
    "query_pre_attn_scalar": 24,
    "final_logit_softcapping": 3.0,
}
# fmt: off
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "llama-llama3": ("llama", {"rope_scaling": LLAMA3}),
    "llama-linear": ("llama", {"rope_scaling": {"rope_type": "linear", "factor": 4.0}}),
    "llama-dynamic": ("llama", {"rope_scaling": {"rope_type": "dynamic", "factor": 4.0}}),
    "llama-yarn": ("llama", {"rope_scaling": YARN, "attention_bias": True}),
    "qwen3": ("qwen3", {}),
    "mistral-window": ("mistral", {"sliding_window": WINDOW}),
    "qwen2-window": ("qwen2", {"use_sliding_window": True, "sliding_window": WINDOW,
                               "max_window_layers": 2}),
    "gemma3": ("gemma3_text", GEMMA),
    "smollm3": ("smollm3", {"num_hidden_layers": 5}),  # layer 3 without rotary
}
# fmt: on
TEXT = "灯塔 🗼 stands on the rocks; สวัสดี, the sea rises and falls at night. 你好，世界！"


@pytest.fixture(scope="module", params=list(CASES))
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """(the saved folder, the transformers model, the prompt's ids) of one case."""
    kind, settings = CASES[request.param]
    root = tmp_path_factory.mktemp(request.param)
    reference = tiny_models.save(root, tiny_models.config(kind, **settings))
    return root, reference, tiny_models.encode(TEXT)


def logits_of(model: Any, cfg: Any, ids: list[int]) -> torch.Tensor:
    cache = KVCache(cfg, max_slots=1, max_len=len(ids))
    cache.reserve(1, len(ids))
    with torch.inference_mode():
        args = (torch.tensor([ids]), torch.arange(len(ids))[None], torch.tensor([0]), cache)
        return model(*args, all_logits=True)[0]  # (T, vocab)


def test_the_logits_are_transformers_at_every_position(case: Any) -> None:
    root, reference, ids = case
    assert len(ids) > 4 * WINDOW
    with torch.inference_mode():
        want = reference(torch.tensor([ids])).logits[0]
    assert want.abs().max() > 2  # peaked enough that a wrong layer would show
    plain = load_model(str(root), EngineConfig(dtype="float32", kernels=False))
    fast = load_model(str(root), EngineConfig(dtype="float32"))
    assert plain.model.kernels is None and fast.model.kernels is not None
    torch.testing.assert_close(logits_of(plain.model, plain.config, ids), want, rtol=0, atol=1e-4)
    assert fast.model.stack() is not None  # the kernels' one `layers` call
    torch.testing.assert_close(logits_of(fast.model, fast.config, ids), want, rtol=0, atol=1e-4)
    fast.model._stack = False  # the kernels one by one, from Python: the same bits
    torch.testing.assert_close(logits_of(fast.model, fast.config, ids), want, rtol=0, atol=1e-4)


@pytest.mark.parametrize("kernels", [True, False], ids=["kernels", "pytorch"])
def test_greedy_decoding_across_the_window_is_transformers(case: Any, kernels: bool) -> None:
    """Prompts of 40 and 70 tokens, 30 tokens each, decoded together (prompts in chunks
    of 16, so a chunk and the window's edge fall inside them)."""
    root, reference, ids = case
    loaded = load_model(str(root), EngineConfig(dtype="float32", kernels=kernels))
    engine = Engine(loaded.model, loaded.tokenizer, max_prefill_tokens=16, prefill_chunk=16)
    prompts = [ids[:40], ids[:70]]
    params = SamplingParams(temperature=0, max_tokens=30, ignore_eos=True)
    done = engine.generate(prompts, params)
    for prompt, completion in zip(prompts, done, strict=True):
        with torch.inference_mode():
            out = reference.generate(
                torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                do_sample=False, max_new_tokens=30, min_new_tokens=30,
            )  # fmt: skip
        want = out[0, len(prompt) :].tolist()
        got = completion.token_ids
        if tiny_models.EOS in got:  # transformers' min_new_tokens bars EOS: compare before it
            cut = got.index(tiny_models.EOS)
            got, want = got[:cut], want[:cut]
        assert len(got) >= 10
        assert got == want


def test_a_folder_is_read_with_its_architectures_features(case: Any) -> None:
    root, reference, _ = case
    cfg = load_model(str(root), EngineConfig(dtype="float32", kernels=False)).config
    hf = reference.config
    assert cfg.model_type == hf.model_type
    windows = [cfg.window(i) for i in range(cfg.num_layers)]
    if hf.model_type in ("mistral", "qwen2", "gemma3_text"):
        assert WINDOW in windows
        assert windows == [
            hf.sliding_window if t == "sliding_attention" else None
            for t in getattr(hf, "layer_types", ["sliding_attention"] * hf.num_hidden_layers)
        ]
    else:
        assert windows == [None] * cfg.num_layers
    if hf.model_type == "smollm3":
        assert cfg.no_rope_layers == (3,) and cfg.layer_rope(3) is None
