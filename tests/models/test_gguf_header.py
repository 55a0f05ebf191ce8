"""The GGUF header read without the weights: the bundled model's context length, and cut or
foreign files refused with a message naming the file, before any conversion or load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import gen.backends
from gen.cli import main
from gen.errors import ModelError
from gen.models import context_length, prepare, resolve, store
from gen.models.gguf_header import read_header

SLICE = 8 << 20  # past the bundled model's header (about 2 MB), well short of its weights


@pytest.fixture(scope="module")
def bundled() -> Path:
    return store.bundled_gguf()


@pytest.fixture
def cut(bundled: Path, tmp_path: Path) -> Path:
    """The first 8 MB of the bundled GGUF: a whole header, a fraction of the tensors."""
    path = tmp_path / "cut.gguf"
    with bundled.open("rb") as f:
        path.write_bytes(f.read(SLICE))
    return path


def test_the_bundled_header(bundled: Path) -> None:
    header = read_header(bundled)
    assert header.metadata["general.architecture"] == "llama"
    assert header.context_length == 8192
    assert header.data_end == bundled.stat().st_size  # the last tensor ends the file
    assert context_length(resolve("smollm2-135m")) == 8192


def test_a_file_cut_in_its_tensors_is_truncated(cut: Path, bundled: Path) -> None:
    with pytest.raises(ModelError, match="truncated or not a GGUF file") as info:
        read_header(cut)
    message = str(info.value)
    assert message.startswith(f"{cut}: ")
    assert f"{bundled.stat().st_size:,} bytes, the file has {SLICE:,}" in message


def test_a_file_cut_in_its_header_is_truncated(bundled: Path, tmp_path: Path) -> None:
    path = tmp_path / "head.gguf"
    with bundled.open("rb") as f:
        path.write_bytes(f.read(100_000))  # inside the vocabulary
    with pytest.raises(ModelError, match=r"truncated or not a GGUF file \(the file ends"):
        read_header(path)


@pytest.mark.parametrize(
    ("content", "reason"),
    [(b"", "the file ends"), (b"PK\x03\x04 a zip" * 4, "no GGUF magic"),
     (b"GGUF\x01\x00\x00\x00" + bytes(16), "GGUF version 1")],
    ids=["empty", "another format", "old version"],
)  # fmt: skip
def test_what_is_not_a_gguf_says_why(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "x.gguf"
    path.write_bytes(content)
    with pytest.raises(ModelError, match=f"{path}: truncated or not a GGUF file") as info:
        read_header(path)
    assert reason in str(info.value)


def test_prepare_refuses_a_truncated_file_before_converting(
    cut: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEN_HOME", str(tmp_path / "home"))
    with pytest.raises(ModelError, match="truncated or not a GGUF file") as info:
        prepare(str(cut))
    assert "reshape" not in str(info.value)
    assert not (tmp_path / "home" / "models").exists()


def test_a_hugging_face_directory_reads_config_json(tmp_path: Path) -> None:
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"max_position_embeddings": 64}), "utf-8")
    (folder / "model.safetensors").write_bytes(b"")
    assert context_length(resolve(str(folder))) == 64
    (folder / "config.json").write_text("{}", "utf-8")
    assert context_length(resolve(str(folder))) is None
    assert context_length(resolve("openai:gpt-x")) is None


def test_gen_run_with_a_truncated_model_exits_2_before_loading(
    cut: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    opened: list[Any] = []
    monkeypatch.setattr(gen.backends, "open_backend", lambda *a, **k: opened.append(a))
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(f"model: {cut}\nsections:\n  - {{id: a, prompt: Hi}}\n", "utf-8")
    assert main(["run", str(pipeline), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{pipeline}:1:8: model: {cut}: truncated or not a GGUF file")
    assert main(["run", str(pipeline), "--model", str(cut), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --model: {cut}: truncated or not a GGUF file")
    assert opened == [] and "Traceback" not in err
