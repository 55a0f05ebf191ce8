"""Each architecture the engine runs, held to transformers on a tiny random model of it
(tests/tiny_models.py): Llama with each rope scaling, Qwen3, Mistral and Qwen2 with
sliding windows, Gemma 3 and SmolLM3. The logits at every position of a prompt longer
than the window agree within 1e-4 (float32), through the PyTorch forms, the kernels'
per-layer loop and their one-call `layers`; greedy decoding across the window's edge
gives transformers' tokens, with the window layers' cache rows rings of window + chunk - 1
positions, and so do prefix reuse and another round of a parked request."""

from __future__ import annotations

from pathlib import Path
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
    fused = logits_of(fast.model, fast.config, ids)
    torch.testing.assert_close(fused, want, rtol=0, atol=1e-4)
    fast.model._stack = False  # the kernels one by one, from Python: the same bits
    assert torch.equal(logits_of(fast.model, fast.config, ids), fused)


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
        assert completion.token_ids == reference_greedy(reference, prompt, 30)


def reference_greedy(reference: Any, prompt: list[int], n: int) -> list[int]:
    """transformers' greedy tokens after `prompt`, n of them, EOS as any other (the
    engine's ignore_eos): the argmax of its logits over the whole text, token by token."""
    ids = list(prompt)
    with torch.inference_mode():
        for _ in range(n):
            ids.append(int(reference(torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(prompt) :]


@pytest.fixture(scope="module", params=["mistral-window", "gemma3"])
def windowed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    kind, settings = CASES[request.param]
    root = tmp_path_factory.mktemp(request.param)
    return root, tiny_models.save(root, tiny_models.config(kind, **settings))


@pytest.mark.parametrize("kernels", [True, False], ids=["kernels", "pytorch"])
def test_window_layers_keep_rings_and_prefixes_are_reused_where_they_serve(
    windowed: Any, kernels: bool
) -> None:
    """Prompt A (70 tokens) decodes 20 and finishes: the prefix store keeps the 89
    positions it ran, the window layers' last 31 of them. Prompt B continues A's text:
    it copies all 89 and decodes transformers' tokens. Prompt C shares only A's first 40
    tokens, which A's rings no longer hold the window of: nothing is copied, and it too
    decodes transformers' tokens. A held request's next round goes on past the ring."""
    root, reference = windowed
    loaded = load_model(str(root), EngineConfig(dtype="float32", kernels=kernels))
    engine = Engine(loaded.model, loaded.tokenizer, max_prefill_tokens=16, prefill_chunk=16)
    cache = engine.runner.cache
    ids = tiny_models.encode(TEXT)
    greedy = SamplingParams(temperature=0, max_tokens=20, ignore_eos=True)

    a = engine.generate([ids[:70]], greedy)[0]
    ring = WINDOW + 16 - 1
    cfg = loaded.config
    windows = [i for i in range(cfg.num_layers) if cfg.window(i) is not None]
    assert windows and all(cache.k[i].shape[2] == ring for i in windows)
    assert all(cache.k[i].shape[2] >= 90 for i in range(cfg.num_layers) if i not in windows)
    assert cache.bytes_for(90) < 90 * cache.bytes_per_token()

    b_prompt = ids[:70] + a.token_ids + tiny_models.encode(" 🌊 继续")
    b = engine.generate([b_prompt], greedy)[0]
    assert b.cached_prompt_tokens == 89
    c_prompt = ids[:40] + tiny_models.encode(" — another way on, ขอบคุณ")
    c = engine.generate([c_prompt], greedy)[0]
    assert c.cached_prompt_tokens == 0  # A's rings passed over what C would see
    for prompt, done in ((b_prompt, b), (c_prompt, c)):
        assert done.token_ids == reference_greedy(reference, prompt, 20)

    # another round of a held request: 50 + 20 positions, then 20 more past the ring
    held = engine.add_request(ids[:50], greedy, hold=True)
    tokens: list[int] = []
    parked = False
    while not parked:
        for out in engine.step():
            if out.request_id == held:
                tokens += out.token_ids
                parked = out.parked
    assert engine.resume(held, 20) == 70  # carried over in the cache, nothing re-run
    while engine.has_unfinished():
        tokens += [i for o in engine.step() if o.request_id == held for i in o.token_ids]
    assert tokens == reference_greedy(reference, ids[:50], 40)


def test_ring_rows_copied_from_a_live_row_and_moved_between_slots_decode_alike(
    windowed: Any,
) -> None:
    """Y shares X's first 44 tokens: it waits while X's prompt runs, then copies them from
    X's row (its rings already wrapped). Z stops early: the last row moves into its slot.
    Every request decodes transformers' tokens."""
    root, reference = windowed
    loaded = load_model(str(root), EngineConfig(dtype="float32"))
    engine = Engine(loaded.model, loaded.tokenizer, max_prefill_tokens=16, prefill_chunk=16)
    ids = tiny_models.encode(TEXT)
    prompts = [tiny_models.encode("Z 🎈"), ids[:48], ids[:44] + tiny_models.encode(" ok")]
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in (3, 24, 24)]
    done = engine.generate(prompts, params)
    assert done[2].cached_prompt_tokens == 44
    for prompt, sp, completion in zip(prompts, params, done, strict=True):
        assert completion.token_ids == reference_greedy(reference, prompt, sp.max_tokens)


def test_a_multimodal_gemma3_folder_runs_its_text_part(tmp_path: Path) -> None:
    """Gemma3ForConditionalGeneration's checkpoint: the decoder's weights under
    language_model., the vision tower's left out; transformers' text-only logits."""
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, SiglipVisionConfig

    text = tiny_models.config("gemma3_text", **GEMMA).to_dict()
    vision = SiglipVisionConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                                num_attention_heads=2, image_size=28, patch_size=14)  # fmt: skip
    special = {"image_token_index": 271, "boi_token_index": 269, "eoi_token_index": 270}
    cfg = Gemma3Config(text_config=text, vision_config=vision.to_dict(), mm_tokens_per_image=4,
                       **special)  # fmt: skip
    torch.manual_seed(0)
    reference = Gemma3ForConditionalGeneration(cfg).eval()
    tiny_models.randomise(reference, 0)
    reference.save_pretrained(tmp_path)
    tiny_models.save_tokenizer(tmp_path)
    ids = tiny_models.encode(TEXT)
    with torch.inference_mode():
        want = reference(input_ids=torch.tensor([ids])).logits[0]
    for kernels in (False, True):
        loaded = load_model(str(tmp_path), EngineConfig(dtype="float32", kernels=kernels))
        assert loaded.config.final_softcap is None  # (GEMMA's cap: the text model's only)
        got = logits_of(loaded.model, loaded.config, ids)
        torch.testing.assert_close(got, want, rtol=0, atol=1e-4)


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
