"""Model specs to local directories: resolution errors, GGUF conversion and its cache."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from gen.errors import ModelError
from gen.models import BUNDLED_NAME, load_model, prepare, resolve, sources, store
from tests.models.ggufs import write_gguf

LLAMA_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 4,
    "hidden_size": 8,
    "intermediate_size": 16,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
}


def hf_dir(root: Path, config: dict[str, object], tokenizer: bool = True) -> Path:
    """A Hugging Face-style directory: config.json, a dummy safetensors, a word tokenizer."""
    from tokenizers import Tokenizer, models

    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps(config), encoding="utf-8")
    save_file({"dummy": torch.zeros(2)}, str(root / "model.safetensors"))
    if tokenizer:
        vocab = {"<unk>": 0, "a": 1, "b": 2, "</s>": 3}
        Tokenizer(models.WordLevel(vocab, unk_token="<unk>")).save(str(root / "tokenizer.json"))
        tokenizer_config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "</s>"}
        (root / "tokenizer_config.json").write_text(json.dumps(tokenizer_config), encoding="utf-8")
    return root


# -- resolve -----------------------------------------------------------------------------


def test_resolve_the_bundled_model() -> None:
    spec = resolve(f"  {BUNDLED_NAME} ")
    assert (spec.name, spec.kind) == (BUNDLED_NAME, "gguf")
    assert spec.path is not None and spec.path.is_file()
    assert spec.path.name == store.BUNDLED_FILE


def test_resolve_a_gguf_file(tmp_path: Path) -> None:
    gguf = tmp_path / "Tiny-Model.Q4_0.gguf"
    gguf.write_bytes(b"GGUF")
    spec = resolve(str(gguf))
    assert (spec.name, spec.kind, spec.path) == ("Tiny-Model.Q4_0", "gguf", gguf.resolve())


def test_resolve_a_missing_gguf_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"
    with pytest.raises(ModelError, match="no such GGUF file") as err:
        resolve(str(missing))
    assert str(missing) in str(err.value)


def test_resolve_a_hugging_face_directory(tmp_path: Path) -> None:
    d = hf_dir(tmp_path / "my-model", LLAMA_CONFIG, tokenizer=False)
    spec = resolve(str(d))
    assert (spec.name, spec.kind, spec.path) == ("my-model", "hf", d.resolve())
    assert prepare(spec) == d.resolve()  # nothing to convert


def test_resolve_a_directory_without_config_json(tmp_path: Path) -> None:
    (tmp_path / "weights.safetensors").write_bytes(b"")
    with pytest.raises(ModelError, match=r"no config\.json") as err:
        resolve(str(tmp_path))
    assert str(tmp_path) in str(err.value)


def test_resolve_a_directory_without_weights(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ModelError, match=r"no \*\.safetensors"):
        resolve(str(tmp_path))


def test_resolve_a_file_of_another_kind(tmp_path: Path) -> None:
    other = tmp_path / "model.bin"
    other.write_bytes(b"weights")
    with pytest.raises(ModelError, match=r"not a \.gguf file or a model directory"):
        resolve(str(other))


def test_resolve_an_unknown_spec() -> None:
    with pytest.raises(ModelError, match="unknown model 'llama-9000'") as err:
        resolve("llama-9000")
    assert BUNDLED_NAME in str(err.value) and "openai:" in str(err.value)


def test_resolve_empty_specs() -> None:
    with pytest.raises(ModelError, match="empty model spec"):
        resolve("   ")
    with pytest.raises(ModelError, match="needs a model name"):
        resolve("openai:")


def test_resolve_openai() -> None:
    spec = resolve("openai:gpt-4o-mini")
    assert (spec.kind, spec.remote_model, spec.path) == ("openai", "gpt-4o-mini", None)
    with pytest.raises(ModelError, match="remote model"):
        prepare(spec)


# -- conversion errors -------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [b"this is not a gguf file\x00\x01\x02" * 8, b"", b"GGUF\x03\x00\x00\x00\xff\xff"],
    ids=["junk", "empty", "truncated"],
)
def test_corrupt_gguf_is_a_model_error(gen_home: Path, tmp_path: Path, content: bytes) -> None:
    bad = tmp_path / "x.gguf"
    bad.write_bytes(content)
    with pytest.raises(ModelError, match="truncated or not a GGUF file") as err:
        prepare(str(bad))
    assert str(bad) in str(err.value)
    # refused from its header: nothing converted, nothing left behind
    assert not (gen_home / "models").exists()
    with pytest.raises(ModelError):
        load_model(str(bad))


def test_unsupported_architecture(tmp_path: Path) -> None:
    gpt2 = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": 4}
    d = hf_dir(tmp_path / "gpt2", gpt2)
    with pytest.raises(ModelError, match="unsupported architecture") as err:
        load_model(str(d))
    assert "GPT2LMHeadModel" in str(err.value) and "LlamaForCausalLM" in str(err.value)


def test_config_missing_a_key(tmp_path: Path) -> None:
    config = {k: v for k, v in LLAMA_CONFIG.items() if k != "hidden_size"}
    d = hf_dir(tmp_path / "incomplete", config)
    with pytest.raises(ModelError, match="missing the key 'hidden_size'"):
        load_model(str(d))


def test_weights_that_do_not_fit_the_architecture(tmp_path: Path) -> None:
    d = hf_dir(tmp_path / "llama", LLAMA_CONFIG)
    with pytest.raises(ModelError, match="weights do not match"):
        load_model(str(d))


# -- the conversion cache ----------------------------------------------------------------


def fake_convert(calls: list[Path]) -> Callable[..., None]:
    """Stands in for convert_gguf: records the call, writes a config and the done marker."""

    def convert(gguf: Path, out: Path, weights: bool = True) -> None:
        calls.append(gguf)
        (out / "config.json").write_text("{}", encoding="utf-8")
        (out / store.DONE_MARKER).write_text("{}", encoding="utf-8")

    return convert


def test_conversion_is_cached(
    gen_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Path] = []
    monkeypatch.setattr(store, "convert_gguf", fake_convert(calls))
    gguf = write_gguf(tmp_path / "m.gguf")
    first = prepare(str(gguf))
    assert first.parent == gen_home / "models" and first.name.startswith("m-")
    assert (first / "config.json").is_file()
    assert prepare(str(gguf)) == first
    assert calls == [gguf.resolve()]  # converted once
    assert store.cached_models() == [first]
    assert sorted(p.name for p in (gen_home / "models").iterdir()) == [first.name, "sources"]

    write_gguf(gguf, layers=2)  # same name, new content: a new conversion
    second = prepare(str(gguf))
    assert second != first and len(calls) == 2


def test_a_files_hash_is_computed_once_per_version_of_the_file(
    gen_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A warm load finds the converted folder from the file's stat (path, size, mtime,
    inode), not by hashing the whole file again; a touched or copied file is hashed anew."""
    gguf = write_gguf(tmp_path / "m.gguf")
    hashed: list[Path] = []
    real = sources.file_sha256

    def counted(path: Path) -> str:
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(sources, "file_sha256", counted)
    first = store.converted_dir(gguf)
    assert first.name == f"m-{real(gguf)[:16]}"
    assert store.converted_dir(gguf) == first and hashed == [gguf]  # the record answered
    stat = gguf.stat()
    os.utime(gguf, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # touched: hashed again
    assert store.converted_dir(gguf) == first and len(hashed) == 2
    copy = tmp_path / "elsewhere" / "m.gguf"
    copy.parent.mkdir()
    shutil.copy(gguf, copy)  # another path to the same bytes: the same folder
    assert store.converted_dir(copy) == first and len(hashed) == 3
    assert store.converted_dir(copy) == first and len(hashed) == 3
    for record in (gen_home / "models" / "sources").iterdir():
        record.write_text("{torn", encoding="utf-8")  # a torn record: hashed again
    assert store.converted_dir(gguf) == first and len(hashed) == 4


def test_a_concurrent_conversion_that_finished_first_is_used(
    gen_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gguf = write_gguf(tmp_path / "m.gguf")
    target = store.converted_dir(gguf)

    def racing(src: Path, out: Path, weights: bool = True) -> None:
        fake_convert([])(src, out)
        target.mkdir()  # another process renames its finished copy into place first
        (target / store.DONE_MARKER).write_text('{"winner": true}', encoding="utf-8")
        (target / "extra").write_text("x", encoding="utf-8")

    monkeypatch.setattr(store, "convert_gguf", racing)
    assert prepare(str(gguf)) == target
    assert json.loads((target / store.DONE_MARKER).read_text()) == {"winner": True}
    assert sorted(p.name for p in (gen_home / "models").iterdir()) == [target.name, "sources"]


@pytest.mark.real_model
def test_bundled_conversion_is_reused(real_model: object, monkeypatch: pytest.MonkeyPatch) -> None:
    first = prepare(BUNDLED_NAME)  # converted (or found) when the session loaded the model

    def no_conversion(gguf: Path, out: Path, weights: bool = True) -> None:
        raise AssertionError("the cached conversion should have been reused")

    monkeypatch.setattr(store, "convert_gguf", no_conversion)
    assert prepare(BUNDLED_NAME) == first
    assert (first / store.DONE_MARKER).is_file() and (first / "config.json").is_file()


def test_without_weights_only_the_tokenizer_is_prepared_and_a_full_conversion_serves(
    gen_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Path] = []
    monkeypatch.setattr(store, "convert_gguf", fake_convert(calls))
    gguf = write_gguf(tmp_path / "m.gguf")
    light = prepare(str(gguf), weights=False)
    assert (
        light.name.endswith(store.TOKENIZER_SUFFIX) and prepare(str(gguf), weights=False) == light
    )
    assert store.cached_models() == []  # not a model of its own
    full = prepare(str(gguf))
    assert full != light and len(calls) == 2
    assert prepare(str(gguf), weights=False) == full  # the full one has a tokenizer too
    assert len(calls) == 2


@pytest.mark.real_model
def test_the_bundled_tokenizer_alone_gives_the_full_conversions_config(
    real_model: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dtype gguf's first run: the tokenizer and config from the GGUF in seconds, the same
    model config as the full conversion, and no float32 weights written."""
    from gen.models.loader import load_tokenizer, read_config

    full = prepare(BUNDLED_NAME)
    monkeypatch.setenv("GEN_HOME", str(tmp_path / "home"))
    light = prepare(BUNDLED_NAME, weights=False)
    assert light.name.endswith(store.TOKENIZER_SUFFIX)
    assert not list(light.glob("*.safetensors"))
    tokenizer, full_tokenizer = load_tokenizer(light), load_tokenizer(full)
    assert read_config(light, tokenizer) == read_config(full, full_tokenizer)
    text = "长城 ทะเล 🌊 tea"
    assert tokenizer.encode(text) == full_tokenizer.encode(text)


def test_a_conversion_without_its_done_marker_is_redone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEN_HOME", str(tmp_path / "home"))
    gguf = write_gguf(tmp_path / "m.gguf")
    target = store.converted_dir(gguf)
    target.mkdir(parents=True)
    (target / "junk").write_text("left by a killed conversion")

    def fake_convert(src: Path, out: Path, weights: bool = True) -> None:
        (out / store.DONE_MARKER).write_text("{}")

    monkeypatch.setattr(store, "convert_gguf", fake_convert)
    assert store.prepare(store.resolve(str(gguf))) == target
    assert (target / store.DONE_MARKER).is_file()
    assert not (target / "junk").exists()


def test_a_broken_generation_config_is_a_model_error(tmp_path: Path) -> None:
    from gen.models.loader import read_config

    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    (tmp_path / "generation_config.json").write_text("{broken")
    with pytest.raises(ModelError, match=r"generation_config\.json"):
        read_config(tmp_path, tokenizer=None)
