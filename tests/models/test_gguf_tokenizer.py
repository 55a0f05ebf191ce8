"""A GGUF file's tokenizer and chat template, converted once and cached: the real Gemma 3
270M file (262,144 tokens, no chat template of its own) gets Gemma 3's template, a system
message joins the first user turn, and the cached folder loads as the plain fast backend
with the same ids as the class transformers chose."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gen.engine.chat import encode_chat
from gen.models import BUNDLED_NAME, prepare, sources, store
from gen.models.loader import load_tokenizer
from gen.models.tokenizer import Tokenizer

TEXTS = ["你好，世界", "เขียนเรื่องสั้นเกี่ยวกับทะเล 🌊", "Hello  world\n\n  indented", "<start_of_turn>x"]


@pytest.fixture(scope="module")
def gemma_folder(gemma_gguf: Path) -> Path:
    """The tokenizer and config converted from the Gemma file, in $GEN_HOME (about half a
    minute the first time, then found from the file's stat)."""
    return store.converted(gemma_gguf, weights=False)


@pytest.fixture(scope="module")
def gemma_tokenizer(gemma_folder: Path) -> Any:
    return load_tokenizer(gemma_folder)


def test_gemmas_folder_holds_gen_s_template_and_loads_without_converting(
    gemma_gguf: Path, gemma_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = json.loads((gemma_folder / store.DONE_MARKER).read_text(encoding="utf-8"))
    assert marker["chat_template"] == "gen's for gemma3"
    assert (
        (gemma_folder / "chat_template.jinja")
        .read_text(encoding="utf-8")
        .startswith("{{ bos_token }}")
    )
    settings = json.loads((gemma_folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert settings["tokenizer_class"] == "TokenizersBackend"
    assert len(settings["added_tokens_decoder"]) > 6000  # <unused0> ... included
    monkeypatch.setattr(store, "convert_gguf", lambda *a, **k: pytest.fail("converted again"))
    monkeypatch.setattr(sources, "file_sha256", lambda p: pytest.fail("hashed again"))
    assert store.converted(gemma_gguf, weights=False) == gemma_folder


def test_gemmas_chat_template_gives_its_turns_ids(gemma_tokenizer: Any) -> None:
    tok = gemma_tokenizer
    messages = [{"role": "user", "content": "写一首关于月亮的诗 🌙"}]
    text = "<bos><start_of_turn>user\n写一首关于月亮的诗 🌙<end_of_turn>\n<start_of_turn>model\n"
    ids = encode_chat(tok, messages)
    assert ids == tok.encode(text, add_special_tokens=False)
    assert ids[:2] == [tok.bos_token_id, tok.convert_tokens_to_ids("<start_of_turn>")]
    assert tok.decode(ids) == text


def test_a_system_message_joins_gemmas_first_user_turn(gemma_tokenizer: Any) -> None:
    tok = gemma_tokenizer
    messages = [
        {"role": "system", "content": "Answer in one line."},
        {"role": "user", "content": "Where is 長城?"},
        {"role": "assistant", "content": "In China. 🇨🇳"},
        {"role": "user", "content": "How long?"},
    ]
    text = (
        "<bos><start_of_turn>user\nAnswer in one line.\n\nWhere is 長城?<end_of_turn>\n"
        "<start_of_turn>model\nIn China. 🇨🇳<end_of_turn>\n"
        "<start_of_turn>user\nHow long?<end_of_turn>\n<start_of_turn>model\n"
    )
    assert encode_chat(tok, messages) == tok.encode(text, add_special_tokens=False)
    # the prefix strategy: the last assistant turn left open
    open_turn = encode_chat(tok, messages[:3], continue_final_message=True)
    assert tok.decode(open_turn).endswith("<start_of_turn>model\nIn China. 🇨🇳")


def test_the_plain_backend_tokenizes_as_the_class_transformers_chose(
    gemma_folder: Path, gemma_tokenizer: Any
) -> None:
    from transformers import GemmaTokenizer

    theirs = GemmaTokenizer.from_pretrained(gemma_folder, local_files_only=True)
    ours = gemma_tokenizer
    assert isinstance(ours, Tokenizer)  # the plain backend, read without transformers
    assert len(ours) == len(theirs) == 262_144
    for text in TEXTS:
        assert ours.encode(text) == theirs.encode(text), text
        ids = ours.encode(text)
        assert ours.decode(ids) == theirs.decode(ids)
        assert ours.decode(ids, skip_special_tokens=True) == theirs.decode(
            ids, skip_special_tokens=True
        )
    assert ours.all_special_ids == theirs.all_special_ids
    assert (ours.eos_token_id, ours.bos_token_id) == (1, 2)


@pytest.mark.real_model
def test_the_bundled_models_own_template_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEN_HOME", str(tmp_path / "home"))
    folder = prepare(BUNDLED_NAME, weights=False)
    marker = json.loads((folder / store.DONE_MARKER).read_text(encoding="utf-8"))
    assert marker["chat_template"] == "the file's"
    tok = load_tokenizer(folder)
    ids = encode_chat(tok, [{"role": "user", "content": "你好 🌊"}])
    assert tok.decode(ids).startswith("<|im_start|>")
    settings = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert "<|im_end|>" in {t["content"] for t in settings["added_tokens_decoder"].values()}
