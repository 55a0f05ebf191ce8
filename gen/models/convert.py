"""A GGUF file's tokenizer, chat template and config (and, for dtype float32, its weights)
converted by transformers into a Hugging Face-format folder, made to load fast: the added
tokens listed, the plain fast backend named where it reads the same pipeline, and a chat
template by architecture for a file that has none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from gen.errors import ModelError
from gen.models.chat_templates import CHAT_TEMPLATES
from gen.models.gguf_header import GGUFHeader, read_header
from gen.models.sources import source_sha256

DONE_MARKER = "gen-source.json"  # written last: a folder without it is incomplete
# GGUF architectures gen runs that transformers does not read from a GGUF: their config is
# read here from the metadata, with transformers' key names of the architecture named
OWN_CONFIGS = {"smollm3": "llama"}
NO_ROPE_STEP = 4  # llama.cpp's SmolLM3: no rotary on every fourth layer (its file says nothing)
SPECIAL_IDS = {"bos_token_id": "tokenizer.ggml.bos_token_id",
               "eos_token_id": "tokenizer.ggml.eos_token_id",
               "pad_token_id": "tokenizer.ggml.padding_token_id"}  # fmt: skip


def convert_gguf(gguf: Path, out: Path, weights: bool = True) -> None:
    """Dequantise a GGUF into safetensors + tokenizer files in `out` (done marker last);
    without weights, the tokenizer files and the config only. A file without a chat
    template gets its architecture's from CHAT_TEMPLATES, where there is one."""
    header = read_header(gguf)  # a truncated file would otherwise fail deep in numpy
    local: dict[str, Any] = {"gguf_file": gguf.name, "local_files_only": True}
    try:
        import torch
        from safetensors.torch import save_file
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        arch = str(header.metadata.get("general.architecture"))
        state: dict[str, torch.Tensor] = {}
        if arch in OWN_CONFIGS:  # transformers reads neither its config nor its weights
            from transformers import TokenizersBackend

            tokenizer = TokenizersBackend.from_pretrained(gguf.parent, **local)
            config = own_config(header)
            if weights:
                state = own_weights(gguf, config)
        elif weights:
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, **local)
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, dtype=torch.float32, **local)
            config, state = model.config, model.state_dict()
        else:
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, **local)
            config = AutoConfig.from_pretrained(gguf.parent, **local)
        generation = GenerationConfig.from_model_config(config)
    except ModelError:
        raise
    except Exception as exc:  # transformers raises many types for a bad file
        raise ModelError(f"{gguf}: cannot read this GGUF file: {exc}") from exc
    if weights:
        if config.tie_word_embeddings:
            state.pop("lm_head.weight", None)
        save_file({k: v.contiguous() for k, v in state.items()}, str(out / "model.safetensors"))
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    template = chat_template(tokenizer, str(header.metadata.get("general.architecture")))
    config.save_pretrained(out)
    generation.save_pretrained(out)
    tokenizer.save_pretrained(out)
    list_added_tokens(tokenizer, out / "tokenizer_config.json")
    plain_backend(tokenizer, out)
    spaced_merges(out / "tokenizer.json")
    marker = {"source": str(gguf), "sha256": source_sha256(gguf), "format": "gguf",
              "chat_template": template}  # fmt: skip
    if not weights:
        marker["contents"] = "tokenizer and config"
    (out / DONE_MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")


def chat_template(tokenizer: Any, arch: str) -> str:
    """Whose chat template the tokenizer carries, giving it the architecture's where the
    file had none: "the file's", "gen's for <arch>", or "none"."""
    if getattr(tokenizer, "chat_template", None):
        return "the file's"
    if arch not in CHAT_TEMPLATES:
        return "none"
    tokenizer.chat_template = CHAT_TEMPLATES[arch]
    return f"gen's for {arch}"


def list_added_tokens(tokenizer: Any, settings: Path) -> None:
    """Write the added tokens (Gemma 3: 6,384 of them) into tokenizer_config.json, as
    transformers 4 did: without them transformers 5 parses the whole tokenizer.json again
    to find them on every load (1.2 s of a Gemma 3 tokenizer's 2 s)."""
    config = json.loads(settings.read_text(encoding="utf-8"))
    config["added_tokens_decoder"] = {
        str(index): {"content": t.content, "lstrip": t.lstrip, "normalized": t.normalized,
                     "rstrip": t.rstrip, "single_word": t.single_word, "special": t.special}
        for index, t in sorted(tokenizer.added_tokens_decoder.items())
    }  # fmt: skip
    settings.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def spaced_merges(path: Path) -> None:
    """Write a BPE's merges as "a b" strings, the tokenizers library's older form, where no
    part holds a space: the same merges, read 0.15 s faster of Gemma 3's 515k than pairs."""
    data = json.loads(path.read_text(encoding="utf-8"))
    model = data.get("model") or {}
    merges = model.get("merges")
    if model.get("type") != "BPE" or not isinstance(merges, list):
        return
    if not all(isinstance(m, list) and len(m) == 2 for m in merges):
        return  # already strings
    if any(" " in part for pair in merges for part in pair):
        return
    model["merges"] = [f"{a} {b}" for a, b in merges]
    path.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")


def plain_backend(tokenizer: Any, out: Path) -> None:
    """Name transformers' plain fast backend as the folder's tokenizer class where the
    converted class only builds its pipeline (GemmaTokenizer makes its BPE again from the
    vocabulary and merges on every load: 0.5 s of Gemma 3's) and the plain backend reads
    the same pipeline and special tokens back from the files just written."""
    from transformers import TokenizersBackend

    cls = type(tokenizer)
    if cls is TokenizersBackend or not issubclass(cls, TokenizersBackend):
        return
    builders = cls.__mro__[: cls.__mro__.index(TokenizersBackend)]
    methods = {
        name
        for c in builders
        for name, value in vars(c).items()
        if callable(value) and not isinstance(value, type)  # (not a class such as model = BPE)
    }
    if methods != {"__init__"}:
        return  # it behaves differently, not only builds differently
    settings = out / "tokenizer_config.json"
    original = settings.read_text(encoding="utf-8")
    config = json.loads(original)
    config["tokenizer_class"] = "TokenizersBackend"
    settings.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    plain = TokenizersBackend.from_pretrained(out, local_files_only=True)
    same = plain.backend_tokenizer.to_str() == tokenizer.backend_tokenizer.to_str() and (
        plain.all_special_ids == tokenizer.all_special_ids
    )
    if not same:
        settings.write_text(original, encoding="utf-8")


def own_config(header: GGUFHeader) -> Any:
    """The transformers config of a GGUF file whose architecture transformers does not read
    from one (OWN_CONFIGS), from its metadata as llama.cpp reads it: SmolLM3 is Llama's keys
    and tensors, without rotary embeddings on every fourth layer; the embedding is tied to
    the output where the file has no output.weight. Rope scaling and the head width are
    gen.models.gguf_weights.gguf_config's, as for every file."""
    from transformers import AutoConfig
    from transformers.integrations.ggml import GGUF_CONFIG_MAPPING

    meta = header.metadata
    arch = str(meta["general.architecture"])
    renames = cast(dict[str, str | None], GGUF_CONFIG_MAPPING[OWN_CONFIGS[arch]])
    values: dict[str, Any] = {
        name: meta[f"{arch}.{key}"]
        for key, name in renames.items()
        if name is not None and f"{arch}.{key}" in meta
    }
    for name, key in SPECIAL_IDS.items():
        if key in meta:
            values[name] = meta[key]
    embedding = next((t for t in header.tensors if t.name == "token_embd.weight"), None)
    if "vocab_size" not in values and embedding is not None:
        values["vocab_size"] = embedding.shape[-1]  # GGUF shapes are (in, out)
    values["tie_word_embeddings"] = all(t.name != "output.weight" for t in header.tensors)
    layers = int(values["num_hidden_layers"])
    values["no_rope_layers"] = [int((i + 1) % NO_ROPE_STEP != 0) for i in range(layers)]
    return AutoConfig.for_model(arch, **values)


def own_weights(gguf: Path, config: Any) -> dict[str, Any]:
    """The float32 state dict of a Llama-layout GGUF file (OWN_CONFIGS), in transformers'
    names and row order (the q and k rows permuted back), by gguf-py's dequantisation."""
    from gen.models.gguf_weights import GGUFWeights, unpermute

    weights = GGUFWeights(gguf)
    heads, kv = config.num_attention_heads, config.num_key_value_heads
    names = {"attn_q": ("self_attn.q_proj", heads), "attn_k": ("self_attn.k_proj", kv),
             "attn_v": ("self_attn.v_proj", 0), "attn_output": ("self_attn.o_proj", 0),
             "ffn_gate": ("mlp.gate_proj", 0), "ffn_up": ("mlp.up_proj", 0),
             "ffn_down": ("mlp.down_proj", 0), "attn_norm": ("input_layernorm", 0),
             "ffn_norm": ("post_attention_layernorm", 0)}  # fmt: skip
    state = {"model.embed_tokens.weight": weights.dense(weights.get("token_embd.weight")),
             "model.norm.weight": weights.dense(weights.get("output_norm.weight"))}  # fmt: skip
    if weights.has("output.weight"):
        state["lm_head.weight"] = weights.dense(weights.get("output.weight"))
    for i in range(config.num_hidden_layers):
        for theirs, (ours, permuted) in names.items():
            tensor = weights.get(f"blk.{i}.{theirs}.weight")
            rows = unpermute(tensor.data.shape[0], permuted) if permuted else None
            state[f"model.layers.{i}.{ours}.weight"] = weights.dense(tensor, rows)
    return state
