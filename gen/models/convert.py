"""A GGUF file's tokenizer, chat template and config (and, for dtype float32, its weights)
converted by transformers into a Hugging Face-format folder, made to load fast: the added
tokens listed, the plain fast backend named where it reads the same pipeline, and a chat
template by architecture for a file that has none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gen.errors import ModelError
from gen.models.chat_templates import CHAT_TEMPLATES
from gen.models.gguf_header import read_header
from gen.models.sources import source_sha256

DONE_MARKER = "gen-source.json"  # written last: a folder without it is incomplete


def convert_gguf(gguf: Path, out: Path, weights: bool = True) -> None:
    """Dequantise a GGUF into safetensors + tokenizer files in `out` (done marker last);
    without weights, the tokenizer files and the config only. A file without a chat
    template gets its architecture's from CHAT_TEMPLATES, where there is one."""
    header = read_header(gguf)  # a truncated file would otherwise fail deep in numpy
    local = {"gguf_file": gguf.name, "local_files_only": True}
    try:
        import torch
        from safetensors.torch import save_file
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, **local)
        if weights:
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, dtype=torch.float32, **local)
            config, generation = model.config, model.generation_config
        else:
            config = AutoConfig.from_pretrained(gguf.parent, **local)
            generation = GenerationConfig.from_model_config(config)
    except Exception as exc:  # transformers raises many types for a bad file
        raise ModelError(f"{gguf}: cannot read this GGUF file: {exc}") from exc
    if weights:
        state = model.state_dict()
        if model.config.tie_word_embeddings:
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
