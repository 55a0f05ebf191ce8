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


SUPPORTED_ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM")


@dataclass(frozen=True, slots=True)
class ModelConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    eos_token_ids: tuple[int, ...] = ()
    bos_token_id: int | None = None

    def __post_init__(self) -> None:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads ({self.num_heads}) must be a multiple of "
                f"num_kv_heads ({self.num_kv_heads})"
            )

    @property
    def group_size(self) -> int:
        return self.num_heads // self.num_kv_heads

    @classmethod
    def from_hf(cls, cfg: dict[str, Any], extra_eos: tuple[int, ...] = ()) -> ModelConfig:
        """Build from a config.json dict; raises ValueError for what the engine can't run."""
        archs = cfg.get("architectures") or []
        model_type = cfg.get("model_type")
        if not any(a in SUPPORTED_ARCHITECTURES for a in archs) and model_type not in (
            "llama",
            "mistral",
            "qwen2",
        ):
            raise ValueError(
                f"unsupported architecture {archs or model_type!r}; "
                f"supported: {', '.join(SUPPORTED_ARCHITECTURES)}"
            )
        rope = cfg.get("rope_scaling") or {}
        rope_params = cfg.get("rope_parameters") or {}
        rope_type = rope.get("rope_type", rope.get("type")) or rope_params.get("rope_type")
        if rope_type not in (None, "default"):
            raise ValueError(f"unsupported rope scaling {rope_type!r}")
        window = cfg.get("sliding_window")
        uses_window = cfg.get("use_sliding_window", model_type == "mistral")
        if window and uses_window and window < cfg.get("max_position_embeddings", 0):
            raise ValueError("sliding-window attention is not supported")
        heads = int(cfg["num_attention_heads"])
        hidden = int(cfg["hidden_size"])
        eos = cfg.get("eos_token_id")
        eos_ids = tuple(eos) if isinstance(eos, list) else ((eos,) if eos is not None else ())
        merged = tuple(dict.fromkeys((*eos_ids, *extra_eos)))
        return cls(
            vocab_size=int(cfg["vocab_size"]),
            hidden_size=hidden,
            intermediate_size=int(cfg["intermediate_size"]),
            num_layers=int(cfg["num_hidden_layers"]),
            num_heads=heads,
            num_kv_heads=int(cfg.get("num_key_value_heads") or heads),
            head_dim=int(cfg.get("head_dim") or hidden // heads),
            rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
            rope_theta=float(cfg.get("rope_theta", rope_params.get("rope_theta", 10000.0))),
            max_position_embeddings=int(cfg.get("max_position_embeddings", 2048)),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            attention_bias=bool(cfg.get("attention_bias", model_type == "qwen2")),
            eos_token_ids=merged,
            bos_token_id=cfg.get("bos_token_id"),
        )
