"""Model architecture settings read from a Hugging Face config.json; no tensors here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
