"""What each architecture's config.json means to the engine: Llama, Mistral, Qwen2, Qwen3,
Gemma 3 (text, alone or inside the multimodal Gemma 3) and SmolLM3, read as transformers'
config classes and models read them (old and new key spellings alike) into a ModelConfig.

Whatever the engine would run only approximately (an unknown rope type, a bias or an
activation it has no place for, bidirectional attention) is refused with a ValueError
that names it. Gemma 3's attn_logit_softcapping is left out as transformers' Gemma 3
leaves it out (its attention never caps the scores: query and key norms took that role),
and so is the multimodal Gemma 3's final_logit_softcapping (its generation head caps
nothing).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from gen.engine.config import SLIDING, ModelConfig, Rope

SUPPORTED_ARCHITECTURES = {  # a config's `architectures` entry: its model_type
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Gemma3ForCausalLM": "gemma3_text",
    "Gemma3ForConditionalGeneration": "gemma3",
    "SmolLM3ForCausalLM": "smollm3",
}
GEMMA = ("gemma3_text", "gemma3")
ROPE_KINDS = ("default", "linear", "dynamic", "yarn", "llama3")
# the keys each rope kind reads (transformers' _validate_*_rope_parameters); any other is
# a setting the engine would ignore
ROPE_KEYS = {
    "default": set(),
    "linear": {"factor"},
    "dynamic": {"factor"},
    "yarn": {"factor", "original_max_position_embeddings", "attention_factor", "beta_fast",
             "beta_slow", "mscale", "mscale_all_dim", "truncate"},
    "llama3": {"factor", "low_freq_factor", "high_freq_factor",
               "original_max_position_embeddings"},
}  # fmt: skip
# transformers' default rope_theta per model type where it is not 10000
DEFAULT_THETA = {"smollm3": 2_000_000.0, "gemma3_text": 1_000_000.0}
GEMMA_LOCAL_THETA = 10_000.0
GEMMA_PATTERN = 6  # Gemma 3 without layer_types: every sixth layer global
# Gemma3TextConfig's defaults: a multimodal Gemma 3's config.json lists only what differs
GEMMA_TEXT = {
    "vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216,
    "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
    "head_dim": 256, "max_position_embeddings": 131_072, "rms_norm_eps": 1e-6,
    "query_pre_attn_scalar": 256, "sliding_window": 4096, "bos_token_id": 2, "eos_token_id": 1,
}  # fmt: skip


def model_type(cfg: Mapping[str, Any]) -> str:
    """The config's model_type, or the one its `architectures` name; ValueError for one the
    engine does not run."""
    kind = cfg.get("model_type")
    if kind not in SUPPORTED_ARCHITECTURES.values():
        named = [SUPPORTED_ARCHITECTURES.get(a) for a in cfg.get("architectures") or []]
        kind = next((k for k in named if k is not None), None)
    if kind is None:
        raise ValueError(
            f"unsupported architecture {cfg.get('architectures') or cfg.get('model_type')!r}; "
            f"supported: {', '.join(SUPPORTED_ARCHITECTURES)}"
        )
    return kind


def model_config(cfg: Mapping[str, Any], extra_eos: tuple[int, ...] = ()) -> ModelConfig:
    """The engine's ModelConfig from a config.json dict (a multimodal Gemma 3: its text
    part); extra_eos: more end-of-sequence ids (generation_config.json's, the tokenizer's)."""
    kind = model_type(cfg)
    if kind == "gemma3":  # the multimodal model's text part; it caps no logits
        ids = {k: cfg[k] for k in ("eos_token_id", "bos_token_id") if cfg.get(k) is not None}
        text = {**GEMMA_TEXT, **cfg["text_config"], "final_logit_softcapping": None}
        cfg, kind = {**text, **ids, "model_type": "gemma3_text"}, "gemma3_text"
    gemma = kind in GEMMA
    refuse(cfg, kind)
    heads = int(cfg["num_attention_heads"])
    hidden = int(cfg["hidden_size"])
    layers = int(cfg["num_hidden_layers"])
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    max_positions = int(cfg.get("max_position_embeddings", 2048))
    window, layer_types = windows(cfg, kind, layers)
    rope, local = ropes(cfg, kind, max_positions)
    eos = cfg.get("eos_token_id")
    eos_ids = tuple(eos) if isinstance(eos, list) else ((eos,) if eos is not None else ())
    bias = bool(cfg.get("attention_bias", kind == "qwen2"))
    scalar = cfg.get("query_pre_attn_scalar") if gemma else None
    rotates = rope_layers(cfg, layers) if kind == "smollm3" else [1] * layers
    return ModelConfig(
        vocab_size=int(cfg["vocab_size"]),
        hidden_size=hidden,
        intermediate_size=int(cfg["intermediate_size"]),
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=int(cfg.get("num_key_value_heads") or heads),
        head_dim=head_dim,
        rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
        rope=rope,
        max_position_embeddings=max_positions,
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", gemma or kind == "smollm3")),
        attention_bias=bias,
        output_bias=bias and kind != "qwen2",  # Qwen2's o_proj never has one
        eos_token_ids=tuple(dict.fromkeys((*eos_ids, *extra_eos))),
        bos_token_id=cfg.get("bos_token_id"),
        model_type=kind,
        sliding_window=window,
        layer_types=layer_types,
        local_rope=local,
        no_rope_layers=tuple(i for i, r in enumerate(rotates) if not r),
        qk_norm=kind == "qwen3" or gemma,
        sandwich_norms=gemma,
        activation="gelu_tanh" if gemma else "silu",
        embedding_scale=math.sqrt(hidden) if gemma else 1.0,
        attention_scale=float(scalar) ** -0.5 if scalar else None,
        final_softcap=cfg.get("final_logit_softcapping") if gemma else None,
        offset_norms=gemma,
    )


def refuse(cfg: Mapping[str, Any], kind: str) -> None:
    """ValueError for a setting of the config the engine does not implement."""
    act = cfg.get("hidden_activation") or cfg.get("hidden_act")
    wanted = "gelu_pytorch_tanh" if kind in GEMMA else "silu"
    if act is not None and act != wanted:
        raise ValueError(f"{kind}: unsupported activation {act!r} (runs {wanted})")
    if cfg.get("mlp_bias"):
        raise ValueError(f"{kind}: MLP biases (mlp_bias) are not supported")
    if cfg.get("use_bidirectional_attention"):
        raise ValueError(f"{kind}: bidirectional attention is not supported (a decoder is causal)")


def windows(cfg: Mapping[str, Any], kind: str, layers: int) -> tuple[int | None, tuple[str, ...]]:
    """The sliding window and each layer's type, as transformers' models apply them."""
    window = cfg.get("sliding_window")
    if kind == "mistral":  # every layer, where set (Mistral ignores layer_types)
        types = (SLIDING,) * layers if window else ()
    elif kind in GEMMA:  # always on the sliding layers
        pattern = int(cfg.get("sliding_window_pattern") or cfg.get("_sliding_window_pattern")
                      or GEMMA_PATTERN)  # fmt: skip
        types = tuple(cfg.get("layer_types") or (
            SLIDING if (i + 1) % pattern else "full_attention" for i in range(layers)
        ))  # fmt: skip
    else:  # Qwen2, Qwen3, SmolLM3: only with use_sliding_window
        if not cfg.get("use_sliding_window"):
            return None, ()
        types = tuple(cfg.get("layer_types") or default_layer_types(cfg, kind, layers))
    if not window or SLIDING not in types:
        return None, ()
    if int(window) < 1:
        raise ValueError(f"{kind}: sliding_window must be at least 1, got {window}")
    return int(window), types


def default_layer_types(cfg: Mapping[str, Any], kind: str, layers: int) -> list[str]:
    """transformers' layer_types where a config does not list them (Qwen: the layers from
    max_window_layers on slide; SmolLM3: the layers without rotary)."""
    if kind == "smollm3":
        rotates = rope_layers(cfg, layers)
        return [SLIDING if not rotates[i] else "full_attention" for i in range(layers)]
    first = int(cfg.get("max_window_layers", 28))
    return [SLIDING if i >= first else "full_attention" for i in range(layers)]


def rope_layers(cfg: Mapping[str, Any], layers: int) -> list[int]:
    """SmolLM3's no_rope_layers: 1 where a layer rotates, 0 where it does not (by default
    every no_rope_layer_interval-th layer)."""
    given = cfg.get("no_rope_layers")
    if given is not None:
        return [int(v) for v in given]
    interval = int(cfg.get("no_rope_layer_interval", 4))
    return [int((i + 1) % interval != 0) for i in range(layers)]


def ropes(cfg: Mapping[str, Any], kind: str, max_positions: int) -> tuple[Rope, Rope | None]:
    """The rotary embedding of the global layers and, for Gemma 3, the sliding layers'
    own; from rope_parameters (transformers 5, nested by layer type for Gemma 3) or the
    older rope_theta, rope_scaling and rope_local_base_freq."""
    params = dict(cfg.get("rope_parameters") or {})
    nested = any(isinstance(params.get(k), dict) for k in ("full_attention", SLIDING))
    theta = cfg.get("rope_theta", DEFAULT_THETA.get(kind, 10000.0))
    if nested:
        full = dict(params.get("full_attention") or {})
        local = dict(params.get(SLIDING) or {})
    else:
        full = {**params, **(cfg.get("rope_scaling") or {})}
        local = {"rope_theta": cfg.get("rope_local_base_freq", GEMMA_LOCAL_THETA)}
    full.setdefault("rope_theta", theta)
    if cfg.get("partial_rotary_factor", full.get("partial_rotary_factor", 1.0)) != 1.0:
        raise ValueError(f"{kind}: partial rotary embeddings (partial_rotary_factor) are not run")
    if kind not in GEMMA:
        return rope(full, kind, max_positions), None
    local.setdefault("rope_theta", GEMMA_LOCAL_THETA)
    return rope(full, kind, max_positions), rope(local, kind, max_positions)


def rope(params: Mapping[str, Any], kind: str, max_positions: int) -> Rope:
    """One Rope from a rope_parameters dict; ValueError for a kind or setting not run."""
    rope_kind = params.get("rope_type", params.get("type")) or "default"
    if rope_kind not in ROPE_KINDS:
        raise ValueError(
            f"{kind}: unsupported rope scaling {rope_kind!r}; supported: {', '.join(ROPE_KINDS)}"
        )
    known = ROPE_KEYS[rope_kind] | {"rope_type", "type", "rope_theta", "partial_rotary_factor"}
    unknown = sorted(set(params) - known)
    if unknown:
        raise ValueError(f"{kind}: rope scaling {rope_kind!r} with unsupported settings {unknown}")
    original = int(params.get("original_max_position_embeddings") or max_positions)
    factor = params.get("factor")
    if factor is None:
        if rope_kind in ("linear", "dynamic", "llama3"):
            raise ValueError(f"{kind}: rope scaling {rope_kind!r} needs a factor")
        factor = max_positions / original if rope_kind == "yarn" else 1.0
    extras: dict[str, Any] = {}
    for name in ("low_freq_factor", "high_freq_factor", "attention_factor", "mscale",
                 "mscale_all_dim"):  # fmt: skip
        if params.get(name) is not None:
            extras[name] = float(params[name])
    for name in ("beta_fast", "beta_slow"):  # (transformers: `or` its default)
        if params.get(name):
            extras[name] = float(params[name])
    if rope_kind == "llama3" and not {"low_freq_factor", "high_freq_factor"} <= set(params):
        raise ValueError(f"{kind}: llama3 rope scaling needs low_freq_factor and high_freq_factor")
    return Rope(
        theta=float(params["rope_theta"]),
        kind=rope_kind,
        factor=float(factor),
        original_max_position_embeddings=original,
        truncate=bool(params.get("truncate", True)),
        **extras,
    )
