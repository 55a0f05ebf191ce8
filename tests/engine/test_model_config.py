"""ModelConfig.from_hf: each architecture's config.json, in transformers 5's spelling and
the older one the Hub's files keep, read into the engine's features; what the engine
does not run is refused, naming it."""

from __future__ import annotations

from typing import Any

import pytest

from gen.engine import ModelConfig
from gen.engine.config import SLIDING

SHAPE = {"vocab_size": 300, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 6,
         "num_attention_heads": 4, "num_key_value_heads": 2}  # fmt: skip


def read(model_type: str, **settings: Any) -> ModelConfig:
    return ModelConfig.from_hf({"model_type": model_type, **SHAPE, **settings})


def test_a_hub_gemma3_config_reads_as_transformers_5_writes_it() -> None:
    """rope_theta, rope_local_base_freq and rope_scaling (the Hub's files) and the nested
    rope_parameters (transformers 5's) give the same rotary embeddings."""
    old = read("gemma3_text", head_dim=32, rope_theta=1e6, rope_local_base_freq=1e4,
               rope_scaling={"type": "linear", "factor": 8.0}, sliding_window=512,
               sliding_window_pattern=6, query_pre_attn_scalar=256)  # fmt: skip
    new = read("gemma3_text", head_dim=32, sliding_window=512, query_pre_attn_scalar=256,
               rope_parameters={
                   "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                   "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}},
               layer_types=[SLIDING] * 5 + ["full_attention"])  # fmt: skip
    assert old == new
    assert (new.rope.kind, new.rope.factor, new.rope.theta) == ("linear", 8.0, 1e6)
    assert new.local_rope is not None and (new.local_rope.kind, new.local_rope.theta) == (
        "default",
        1e4,
    )
    assert [new.window(i) for i in range(6)] == [512] * 5 + [None]
    assert new.layer_rope(0) == new.local_rope and new.layer_rope(5) == new.rope
    assert new.qk_norm and new.sandwich_norms and new.offset_norms
    assert new.activation == "gelu_tanh" and new.attention_scale == 256**-0.5
    assert new.embedding_scale == 64**0.5 and new.tie_word_embeddings


def test_a_multimodal_gemma3_config_runs_its_text_part() -> None:
    """The Hub's Gemma 3 4B lists only what differs from Gemma3TextConfig's defaults; its
    end-of-turn id is the top level's."""
    cfg = ModelConfig.from_hf({
        "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
        "eos_token_id": [1, 106],
        "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 34,
                        "model_type": "gemma3_text", "sliding_window": 1024,
                        "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                        "final_logit_softcapping": 30.0},
        "vision_config": {"model_type": "siglip_vision_model"},
    }, extra_eos=(1,))  # fmt: skip
    assert (cfg.model_type, cfg.num_layers, cfg.num_heads, cfg.num_kv_heads) == (
        "gemma3_text",
        34,
        8,
        4,
    )
    assert (cfg.head_dim, cfg.vocab_size, cfg.eos_token_ids) == (256, 262_208, (1, 106))
    assert cfg.window(0) == 1024 and cfg.window(5) is None and cfg.rope.kind == "linear"
    assert cfg.final_softcap is None  # transformers' multimodal head caps nothing


@pytest.mark.parametrize(
    ("model_type", "settings", "windows"),
    [
        ("mistral", {"sliding_window": 16}, [16] * 6),
        ("mistral", {"sliding_window": None}, [None] * 6),
        ("qwen2", {"sliding_window": 4096, "use_sliding_window": False}, [None] * 6),
        ("qwen2", {"sliding_window": 16, "use_sliding_window": True, "max_window_layers": 4},
         [None] * 4 + [16] * 2),
        ("qwen3", {"sliding_window": 16, "use_sliding_window": True,
                   "layer_types": [SLIDING, "full_attention"] * 3}, [16, None] * 3),
        ("smollm3", {"sliding_window": 16, "use_sliding_window": True},
         [None, None, None, 16, None, None]),
        ("llama", {}, [None] * 6),
    ],
)  # fmt: skip
def test_each_architecture_slides_where_transformers_does(
    model_type: str, settings: dict[str, Any], windows: list[int | None]
) -> None:
    cfg = read(model_type, **settings)
    assert [cfg.window(i) for i in range(6)] == windows


def test_smollm3_leaves_rotary_out_of_every_fourth_layer() -> None:
    cfg = read("smollm3")
    assert cfg.no_rope_layers == (3,)
    assert cfg.rope.theta == 2_000_000.0  # SmolLM3Config's default
    assert [cfg.layer_rope(i) is None for i in range(6)] == [False] * 3 + [True] + [False] * 2
    given = read("smollm3", no_rope_layers=[1, 0, 1, 0, 1, 1], rope_theta=5e6)
    assert given.no_rope_layers == (1, 3) and given.rope.theta == 5e6


def test_qwen_biases_and_llama3_scaling() -> None:
    qwen2, qwen3 = read("qwen2"), read("qwen3", head_dim=32)
    assert (qwen2.attention_bias, qwen2.output_bias, qwen2.qk_norm) == (True, False, False)
    assert (qwen3.attention_bias, qwen3.output_bias, qwen3.qk_norm) == (False, False, True)
    assert qwen3.head_dim == 32
    llama = read("llama", attention_bias=True, rope_theta=500000.0, rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192})  # fmt: skip
    assert (llama.attention_bias, llama.output_bias) == (True, True)
    assert (llama.rope.kind, llama.rope.theta, llama.rope.original_max_position_embeddings) == (
        "llama3",
        500000.0,
        8192,
    )


@pytest.mark.parametrize(
    ("model_type", "settings", "message"),
    [
        ("gpt2", {}, "unsupported architecture 'gpt2'; supported: LlamaForCausalLM, "),
        ("llama", {"rope_scaling": {"rope_type": "longrope", "factor": 2.0}},
         "unsupported rope scaling 'longrope'; supported: default, linear, dynamic, yarn, llama3"),
        ("llama", {"rope_scaling": {"rope_type": "linear", "factor": 2.0, "extra": 1}},
         r"rope scaling 'linear' with unsupported settings \['extra'\]"),
        ("llama", {"rope_scaling": {"rope_type": "llama3", "factor": 8.0}},
         "llama3 rope scaling needs low_freq_factor and high_freq_factor"),
        ("llama", {"rope_scaling": {"rope_type": "linear"}},
         "rope scaling 'linear' needs a factor"),
        ("llama", {"partial_rotary_factor": 0.5}, "partial rotary embeddings"),
        ("llama", {"mlp_bias": True}, "MLP biases"),
        ("llama", {"hidden_act": "gelu"}, "unsupported activation 'gelu'"),
        ("gemma3_text", {"use_bidirectional_attention": True}, "bidirectional attention"),
        ("mistral", {"sliding_window": 0.5}, "sliding_window must be at least 1"),
    ],
)  # fmt: skip
def test_what_the_engine_does_not_run_is_refused(
    model_type: str, settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        read(model_type, **settings)


def test_the_supported_architectures_are_named() -> None:
    with pytest.raises(ValueError) as err:
        ModelConfig.from_hf({"architectures": ["GPT2LMHeadModel"], **SHAPE})
    for name in ("Qwen3ForCausalLM", "Gemma3ForCausalLM", "SmolLM3ForCausalLM", "GPT2LMHeadModel"):
        assert name in str(err.value)
    by_name = ModelConfig.from_hf({"architectures": ["Qwen3ForCausalLM"], **SHAPE})
    assert by_name.model_type == "qwen3"
