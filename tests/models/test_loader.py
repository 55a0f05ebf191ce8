"""Loading the bundled model: the engine's config, weights and tokenizer agree."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from gen.engine import LlamaModel, kernels
from gen.engine.config import EngineConfig
from gen.engine.packed import KernelLinear, PackedLinear
from gen.models import BUNDLED_NAME, gen_home, load_model
from gen.models.loader import turn_ends

pytestmark = pytest.mark.real_model


def test_bundled_model_loads(real_model: Any) -> None:
    assert real_model.name == BUNDLED_NAME
    assert isinstance(real_model.model, LlamaModel)
    cfg = real_model.config
    assert cfg.vocab_size == len(real_model.tokenizer)
    assert real_model.tokenizer.eos_token_id in cfg.eos_token_ids
    assert real_model.context_window == cfg.max_position_embeddings == 8192
    assert not any(p.is_meta for p in real_model.model.parameters())
    # the engine's compiled kernels by default where supported (this project's machines
    # have g++ and AVX2), else oneDNN's packed layers
    if kernels.supported():
        assert kernels.load() is not None, kernels.error()
        assert real_model.model.kernels is not None
        assert isinstance(real_model.model.lm_head, KernelLinear)
    else:
        assert isinstance(real_model.model.lm_head, PackedLinear)
    assert not any(isinstance(m, torch.nn.Linear) for m in real_model.model.modules())


def test_unpacked_load_ties_the_output_head_to_the_embeddings() -> None:
    loaded = load_model(BUNDLED_NAME, EngineConfig(dtype="float32"), packed=False)
    assert isinstance(loaded.model.lm_head, torch.nn.Linear)
    assert loaded.model.lm_head.weight is loaded.model.embed_tokens.weight  # tied


def test_bundled_model_is_cached_under_gen_home(real_model: Any) -> None:
    assert real_model.path.parent == gen_home() / "models"
    assert (real_model.path / "model.safetensors").is_file()


def test_kernels_switched_off_load_the_packed_pytorch_layers() -> None:
    off = EngineConfig.from_env({"GEN_KERNELS": "0"})
    assert off.kernels is False
    loaded = load_model(BUNDLED_NAME, off)
    assert loaded.model.kernels is None
    assert not loaded.model.takes_tokens(KVCacheProbe(loaded))
    assert all(not isinstance(m, KernelLinear) for m in loaded.model.modules())


def KVCacheProbe(loaded: Any) -> Any:
    from gen.engine.kv_cache import KVCache

    return KVCache(loaded.config, max_slots=1, max_len=8)


def test_the_tokenizer_is_loaded_as_its_backend_class_the_same_as_autotokenizer(
    real_model: Any, tmp_path: Path
) -> None:
    """A folder gen converted whose tokenizer names transformers' fast backend is read with
    the tokenizers library alone; a folder that names the backend but is not gen's skips
    AutoTokenizer's config lookup; what comes back works as AutoTokenizer's does. Any other
    class still goes through AutoTokenizer."""
    from transformers import AutoTokenizer

    from gen.models.convert import DONE_MARKER
    from gen.models.loader import load_tokenizer
    from gen.models.tokenizer import Tokenizer

    path = real_model.path
    direct, auto = load_tokenizer(path), AutoTokenizer.from_pretrained(path)
    assert isinstance(direct, Tokenizer)
    assert type(auto).__name__ == "TokenizersBackend"
    text = "灯塔 🗼 สวัสดี — a lighthouse\n\n"
    assert direct.encode(text) == auto.encode(text)
    assert direct.decode(direct.encode(text)) == auto.decode(auto.encode(text)) == text
    chat = [{"role": "user", "content": text}]
    assert direct.apply_chat_template(chat, tokenize=False) == auto.apply_chat_template(
        chat, tokenize=False
    )
    specials = [(t.eos_token, t.bos_token, len(t)) for t in (direct, auto)]
    assert specials[0] == specials[1]

    # not converted by gen: transformers' backend class, chosen without AutoTokenizer
    other = tmp_path / "other"
    shutil.copytree(path, other, ignore=shutil.ignore_patterns("*.safetensors"))
    (other / DONE_MARKER).unlink()
    assert type(load_tokenizer(other)).__name__ == "TokenizersBackend"
    # a folder that names another class, or an auto_map, is AutoTokenizer's to choose
    settings = json.loads((other / "tokenizer_config.json").read_text("utf-8"))
    settings["tokenizer_class"] = "PreTrainedTokenizerFast"
    (other / "tokenizer_config.json").write_text(json.dumps(settings), "utf-8")
    assert load_tokenizer(other).encode(text) == auto.encode(text)


class TemplateTokenizer:
    """What turn_ends reads of a tokenizer: its chat template and special tokens."""

    unk_token_id = 0

    def __init__(self, template: str | None, vocab: dict[str, int]) -> None:
        self.chat_template = template
        self.vocab = vocab

    def convert_tokens_to_ids(self, tokens: list[str]) -> list[int]:
        return [self.vocab.get(t, self.unk_token_id) for t in tokens]


def test_the_turn_end_a_chat_template_writes_ends_a_reply() -> None:
    vocab = {"<end_of_turn>": 106, "<|im_end|>": 2, "<|eot_id|>": 128009}
    gemma = "{{ '<start_of_turn>' + m['content'] + '<end_of_turn>\n' }}"
    assert turn_ends(TemplateTokenizer(gemma, vocab)) == [106]
    both = "<|im_end|> … <end_of_turn>"
    assert turn_ends(TemplateTokenizer(both, vocab)) == [106, 2]
    assert turn_ends(TemplateTokenizer("<|eot_id|>", {})) == []  # not one token: unknown
    assert turn_ends(TemplateTokenizer(None, vocab)) == []  # no template: no turns
