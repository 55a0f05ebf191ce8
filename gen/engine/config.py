"""Settings, no tensors: a model's architecture (from its config.json) and how the engine
runs it (EngineConfig, built once where gen starts: the CLI, the server, bench)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gen.errors import ConfigError

DTYPES = ("float32", "gguf", "q8", "int8")
KERNELS = ("0", "1", "avx2")  # GEN_KERNELS: off, on, on without AVX-512
PREFIX_CACHE_BYTES = 256 * 2**20


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """How the engine loads and runs a model. Built once at the edge (`from_env`), then
    passed down: nothing below reads the environment.

    dtype: float32; gguf (a GGUF file's own quantised blocks, read by the kernels); q8
    (Q8_0 blocks made from float weights at load); or int8 (int8 weights and
    dynamically quantised activations in the linear layers). None (the default): the
    model's own, gguf for a GGUF file where the kernels run, float32 otherwise.
    kernels: the compiled CPU kernels where the machine takes them.
    kv_budget_bytes caps the KV cache (None: no cap); requests that would pass it wait.
    While others decode, a step runs at most prefill_chunk prompt tokens (a long prompt
    goes in chunks between decode steps); alone, up to max_prefill_tokens.
    prefix_cache_bytes keeps finished sequences' keys and values for later prompts that
    start the same way (0 turns prefix reuse off)."""

    dtype: str | None = None
    kernels: bool = True
    max_slots: int = 16
    max_model_len: int | None = None
    max_prefill_tokens: int = 2048
    prefill_chunk: int = 512
    kv_budget_bytes: int | None = None
    prefix_cache_bytes: int = PREFIX_CACHE_BYTES

    def __post_init__(self) -> None:
        if self.dtype is not None and self.dtype not in DTYPES:
            raise ConfigError(f"dtype {self.dtype!r} is not one of {', '.join(DTYPES)}")
        for name in ("max_slots", "max_prefill_tokens", "prefill_chunk"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.max_model_len is not None and self.max_model_len < 2:
            raise ConfigError(f"max_model_len must be at least 2, got {self.max_model_len}")
        if self.prefix_cache_bytes < 0:
            raise ConfigError(f"prefix_cache_bytes must be >= 0, got {self.prefix_cache_bytes}")
        if self.kv_budget_bytes is not None and self.kv_budget_bytes <= 0:
            raise ConfigError(f"kv_budget_bytes must be positive, got {self.kv_budget_bytes}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **given: Any) -> EngineConfig:
        """The settings `given` (None: not given), else the environment's: GEN_DTYPE,
        GEN_KERNELS (0: kernels off; avx2: no AVX-512 kernels, read by the kernels
        themselves where they load), GEN_KV_BUDGET_MB, GEN_PREFIX_CACHE_MB."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        if env.get("GEN_DTYPE"):
            if env["GEN_DTYPE"] not in DTYPES:
                raise ConfigError(f"GEN_DTYPE must be one of {', '.join(DTYPES)}, "
                                  f"got {env['GEN_DTYPE']!r}")  # fmt: skip
            values["dtype"] = env["GEN_DTYPE"]
        kernels = env.get("GEN_KERNELS", "1")
        if kernels not in KERNELS:
            raise ConfigError(f"GEN_KERNELS must be one of {', '.join(KERNELS)}, "
                              f"got {kernels!r}")  # fmt: skip
        if kernels == "0":
            values["kernels"] = False
        if env.get("GEN_KV_BUDGET_MB"):
            values["kv_budget_bytes"] = _megabytes("GEN_KV_BUDGET_MB", env["GEN_KV_BUDGET_MB"])
        if env.get("GEN_PREFIX_CACHE_MB"):
            values["prefix_cache_bytes"] = _megabytes(
                "GEN_PREFIX_CACHE_MB", env["GEN_PREFIX_CACHE_MB"], zero=True
            )
        return cls(**values | {k: v for k, v in given.items() if v is not None})


def _megabytes(var: str, text: str, zero: bool = False) -> int:
    """A size in megabytes (fractions allowed) from environment variable `var`, in bytes."""
    try:
        mb = float(text)
    except ValueError:
        mb = float("nan")
    if not (0 if zero else 1 / 2**20) <= mb < 2**40:  # (nan fails every comparison)
        least = "0 or more" if zero else "more than 0"
        raise ConfigError(f"{var} must be a number of megabytes, {least}; got {text!r}")
    return int(mb * 2**20)


@dataclass(frozen=True, slots=True)
class Rope:
    """A rotary embedding as transformers' rope_parameters describe it (its
    modeling_rope_utils): kind default, linear, dynamic, yarn or llama3, and their
    settings. freq_factors: a GGUF file's rope_freqs tensor (llama.cpp's form of Llama 3's
    scaling), one factor per frequency that its inverse frequency is divided by."""

    theta: float = 10000.0
    kind: str = "default"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 0
    attention_factor: float | None = None
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: float | None = None
    mscale_all_dim: float | None = None
    truncate: bool = True
    freq_factors: tuple[float, ...] = ()


SLIDING = "sliding_attention"  # a layer type (transformers' name) that attends within a window
ACTIVATIONS = ("silu", "gelu_tanh")  # of the MLP's gate


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """A decoder's shape and the features its architecture adds to Llama's (read from a
    config.json by from_hf, gen.engine.architectures): a window on the layers whose type is
    SLIDING, their own rotary (local_rope), layers without rotary (no_rope_layers), norms
    of each query and key head (qk_norm), norms after the attention and the MLP as well as
    before (sandwich_norms), the MLP's activation (silu or gelu_tanh), a scale on the
    embeddings, the attention's scale (None: head_dim ** -0.5) and a tanh cap on the
    logits. The model's norms scale by their weight; where a checkpoint's scale by
    1 + weight (offset_norms), the loaders add the 1."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-5
    rope: Rope = Rope()
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = False
    attention_bias: bool = False  # on the q, k and v projections
    output_bias: bool = False  # on the attention's output projection
    eos_token_ids: tuple[int, ...] = ()
    bos_token_id: int | None = None
    model_type: str = "llama"
    sliding_window: int | None = None
    layer_types: tuple[str, ...] = ()  # per layer; () or "full_attention": no window
    local_rope: Rope | None = None  # the SLIDING layers' rotary; None: `rope`
    no_rope_layers: tuple[int, ...] = ()
    qk_norm: bool = False
    sandwich_norms: bool = False
    activation: str = "silu"
    embedding_scale: float = 1.0
    attention_scale: float | None = None
    final_softcap: float | None = None
    offset_norms: bool = False  # a checkpoint's norm weight w scales by 1 + w (Gemma's)

    def __post_init__(self) -> None:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads ({self.num_heads}) must be a multiple of "
                f"num_kv_heads ({self.num_kv_heads})"
            )
        if self.layer_types and len(self.layer_types) != self.num_layers:
            raise ValueError(f"{len(self.layer_types)} layer_types for {self.num_layers} layers")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation {self.activation!r} is not one of {ACTIVATIONS}")

    @property
    def group_size(self) -> int:
        return self.num_heads // self.num_kv_heads

    def window(self, layer: int) -> int | None:
        """How many positions up to its own a token sees in `layer`; None: all of them."""
        sliding = bool(self.layer_types) and self.layer_types[layer] == SLIDING
        return self.sliding_window if sliding else None

    def layer_rope(self, layer: int) -> Rope | None:
        """The rotary embedding of `layer`; None for a layer without one."""
        if layer in self.no_rope_layers:
            return None
        if self.local_rope is not None and self.window(layer) is not None:
            return self.local_rope
        return self.rope

    @classmethod
    def from_hf(cls, cfg: dict[str, Any], extra_eos: tuple[int, ...] = ()) -> ModelConfig:
        """Build from a config.json dict; raises ValueError for what the engine can't run."""
        from gen.engine.architectures import model_config

        return model_config(cfg, extra_eos)
