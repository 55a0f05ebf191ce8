"""gen's own tokenizer (the tokenizers library alone) against transformers' on the same
converted folders: the same ids, text, special tokens and chat templates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2
import pytest
import tokenizers

from gen.engine.chat import encode_chat
from gen.models import BUNDLED_NAME, prepare, store
from gen.models.convert import spaced_merges
from gen.models.loader import load_tokenizer
from gen.models.tokenizer import Tokenizer, plain

TEXTS = [
    "你好，世界。今天的天气很好！",
    "เขียนเรื่องสั้นเกี่ยวกับทะเล 🌊🐳",
    "Hello  world\n\n  indented\ttab",
    "<|im_start|>user\nnot a turn<|im_end|>",
    "<start_of_turn>x<end_of_turn><eos>",
    "",
    " leading space, ünïcödé, and 🇨🇳 flags",
]
CHATS: list[list[dict[str, str]]] = [
    [{"role": "user", "content": "写一首关于月亮的诗 🌙"}],
    [
        {"role": "system", "content": "Answer in one line."},
        {"role": "user", "content": "Where is 長城?"},
        {"role": "assistant", "content": "In China. 🇨🇳"},
        {"role": "user", "content": "How long?"},
    ],
]


def transformers_tokenizer(folder: Path) -> Any:
    from transformers import TokenizersBackend

    return TokenizersBackend.from_pretrained(folder, local_files_only=True)


@pytest.fixture(scope="module")
def bundled_folder() -> Path:
    return prepare(BUNDLED_NAME, weights=False)


@pytest.fixture(scope="module")
def gemma_folder(gemma_gguf: Path) -> Path:
    return store.converted(gemma_gguf, weights=False)


def same_as_transformers(folder: Path) -> None:
    ours = load_tokenizer(folder)
    theirs = transformers_tokenizer(folder)
    assert isinstance(ours, Tokenizer)
    assert (len(ours), ours.vocab_size) == (len(theirs), theirs.vocab_size)
    assert (ours.eos_token_id, ours.bos_token_id) == (theirs.eos_token_id, theirs.bos_token_id)
    assert ours.all_special_ids == theirs.all_special_ids
    assert ours.special_tokens_map == theirs.special_tokens_map
    assert ours.convert_tokens_to_ids(["not-a-token-xyz", ours.eos_token]) == (
        theirs.convert_tokens_to_ids(["not-a-token-xyz", theirs.eos_token])
    )
    for text in TEXTS:
        for special in (True, False):
            ids = ours.encode(text, add_special_tokens=special)
            assert ids == theirs.encode(text, add_special_tokens=special), (text, special)
        for skip in (True, False):
            assert ours.decode(ids, skip_special_tokens=skip) == theirs.decode(
                ids, skip_special_tokens=skip
            )
        assert ours.convert_ids_to_tokens(ids) == theirs.convert_ids_to_tokens(ids)
    for chat in CHATS:
        assert encode_chat(ours, chat) == encode_chat(theirs, chat)
        assert ours.apply_chat_template(chat, tokenize=False) == theirs.apply_chat_template(
            chat, tokenize=False
        )
        opened = [*chat, {"role": "assistant", "content": "部分的回答 "}]
        assert encode_chat(ours, opened, continue_final_message=True) == encode_chat(
            theirs, opened, continue_final_message=True
        )


@pytest.mark.real_model
def test_the_bundled_models_tokenizer_is_transformers_own(bundled_folder: Path) -> None:
    same_as_transformers(bundled_folder)


@pytest.mark.real_model
def test_gemmas_tokenizer_is_transformers_own(gemma_folder: Path) -> None:
    same_as_transformers(gemma_folder)


def word_level(template: str) -> Tokenizer:
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "hi": 3, "there": 4}
    backend = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    backend.add_special_tokens(["<s>", "</s>"])
    settings = {"bos_token": {"content": "<s>"}, "eos_token": "</s>", "unk_token": "<unk>"}
    return Tokenizer(backend, settings, template)


def test_templates_see_the_special_tokens_and_transformers_helpers() -> None:
    template = (
        "{{ bos_token }}{% for m in messages %}{% generation %}{{ m['content'] }}"
        "{% endgeneration %}{{ eos_token }}{% endfor %}"
        "{% if add_generation_prompt %}{{ {'k': '月'} | tojson }}{% endif %}"
    )
    tok = word_level(template)
    messages = [{"role": "user", "content": "hi there"}]
    assert tok.apply_chat_template(messages, tokenize=False) == "<s>hi there</s>"
    assert tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) == (
        '<s>hi there</s>{"k": "月"}'
    )
    assert tok.apply_chat_template(messages) == [1, 3, 4, 2]
    assert tok.apply_chat_template(messages, return_dict=True) == {"input_ids": [1, 3, 4, 2]}
    assert (tok.bos_token_id, tok.eos_token_id, tok.unk_token_id) == (1, 2, 0)
    assert tok.convert_tokens_to_ids("nope") == 0


def test_a_template_that_raises_and_one_that_escapes_are_stopped() -> None:
    refusing = word_level("{{ raise_exception('no system role') }}")
    with pytest.raises(jinja2.TemplateError, match="no system role"):
        refusing.apply_chat_template([{"role": "system", "content": "x"}])
    escaping = word_level("{{ messages.__class__.__mro__ }}")
    with pytest.raises(jinja2.exceptions.SecurityError):
        escaping.apply_chat_template([{"role": "user", "content": "x"}])
    with pytest.raises(ValueError, match="no chat template"):
        word_level(None).apply_chat_template([{"role": "user", "content": "x"}])  # type: ignore[arg-type]


def test_only_plain_settings_are_read_without_transformers() -> None:
    base = {"tokenizer_class": "TokenizersBackend", "eos_token": "</s>"}
    assert plain(base)
    assert not plain({**base, "tokenizer_class": "LlamaTokenizer"})
    assert not plain({**base, "add_bos_token": True})  # a setting it does not read
    assert not plain({**base, "clean_up_tokenization_spaces": True})


def bpe_file(tmp_path: Path, merges: list[tuple[str, str]]) -> Path:
    vocab = {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, " b": 5, "a b": 6}
    backend = tokenizers.Tokenizer(tokenizers.models.BPE(vocab, merges))
    path = tmp_path / "tokenizer.json"
    backend.save(str(path))
    return path


def test_merges_are_written_as_strings_where_no_part_holds_a_space(tmp_path: Path) -> None:
    path = bpe_file(tmp_path, [("a", "b"), ("ab", "c")])
    before = tokenizers.Tokenizer.from_file(str(path)).encode("abcab").ids
    spaced_merges(path)
    assert json.loads(path.read_text("utf-8"))["model"]["merges"] == ["a b", "ab c"]
    assert tokenizers.Tokenizer.from_file(str(path)).encode("abcab").ids == before == [4, 3]

    spaced = bpe_file(tmp_path, [("a", "b"), ("a", " b")])  # a part with a space: kept as pairs
    spaced_merges(spaced)
    assert json.loads(spaced.read_text("utf-8"))["model"]["merges"] == [["a", "b"], ["a", " b"]]
