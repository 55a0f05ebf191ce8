"""`gen validate` and `gen run` say before the run when a length target is out of reach:
the model's context length read without loading it, a conservative tokens per word for the
prompt's script (there is no tokenizer there), an explicit max_rounds, max_words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gen.cli import main
from gen.pipeline import load_pipeline
from gen.pipeline.model_check import check_model
from tests.pipeline.conftest import WritePipeline
from tests.pipeline.fake_backend import FakeBackend, install


@pytest.fixture
def model_2k(tmp_path: Path) -> Path:
    """A Hugging Face folder whose config.json says 2048 tokens; its weights are never read."""
    folder = tmp_path / "model-2k"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"max_position_embeddings": 2048}), "utf-8")
    (folder / "model.safetensors").write_bytes(b"")
    return folder


def warnings_for(write_pipeline: WritePipeline, model: Path, section: str) -> list[str]:
    path = write_pipeline(f"model: {model}\nsections:\n  - {section}\n")
    return check_model(load_pipeline(path))


def test_a_reachable_target_gives_no_warning(write_pipeline: WritePipeline, model_2k: Path) -> None:
    section = "{id: a, prompt: Write about rivers., target_words: 800}"
    assert warnings_for(write_pipeline, model_2k, section) == []


def test_a_target_past_the_window(write_pipeline: WritePipeline, model_2k: Path) -> None:
    section = "{id: a, prompt: Write about rivers., target_words: 1500}"
    (warning,) = warnings_for(write_pipeline, model_2k, section)
    assert warning == (
        "sections.a: a target of 1500 words may not be reached: 1500 words take about 2250 "
        "tokens at 1.50 tokens a word (latin script, a conservative figure; a run measures "
        "the model's tokenizer), more than the 2043 the 2048-token context window leaves the "
        "text beside the 5-token prompt"
    )


def test_a_chinese_target_counts_more_tokens(write_pipeline: WritePipeline, model_2k: Path) -> None:
    section = "{id: a, prompt: 写一篇关于河流的文章。, target_words: 800}"
    (warning,) = warnings_for(write_pipeline, model_2k, section)
    assert "800 words take about 2400 tokens at 3.00 tokens a word (cjk script" in warning


def test_an_explicit_max_rounds_too_small(write_pipeline: WritePipeline, model_2k: Path) -> None:
    section = "{id: a, prompt: Write., target_words: 600, max_rounds: 2}"
    (warning,) = warnings_for(write_pipeline, model_2k, section)
    assert "max_rounds 2 x max_tokens 256 = 512 tokens hold about 341 words" in warning
    assert warning.endswith("leave max_rounds unset to plan 6 rounds")


def test_templated_targets_are_rendered_with_the_inputs(
    write_pipeline: WritePipeline, model_2k: Path
) -> None:
    path = write_pipeline(
        f"model: {model_2k}\ninputs: {{words: 1500, most: 1000}}\nsections:\n"
        "  - {id: a, prompt: Write., target_words: '{{ words }}', max_words: '{{ most }}'}\n"
    )
    (warning,) = check_model(load_pipeline(path))
    assert "max_words (1000) is below target_words (1500)" in warning


def test_a_remote_model_checks_what_it_knows(write_pipeline: WritePipeline) -> None:
    path = write_pipeline(
        "model: openai:gpt-x\nsections:\n"
        "  - {id: a, prompt: Write., target_words: 90000}\n"
        "  - {id: b, prompt: Write., target_words: 600, max_rounds: 2}\n"
    )
    (warning,) = check_model(load_pipeline(path))  # the window is known once it answers
    assert warning.startswith("sections.b: ")


def test_gen_validate_prints_the_warning(
    write_pipeline: WritePipeline, model_2k: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_pipeline(
        f"model: {model_2k}\nsections:\n  - {{id: a, prompt: Write., target_words: 3000}}\n"
    )
    assert main(["validate", str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(f"{path}: ok (1 section")
    assert captured.err.startswith("warning: sections.a: a target of 3000 words may not be")


def test_gen_run_warns_before_the_model_loads(
    write_pipeline: WritePipeline,
    model_2k: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    install(monkeypatch, FakeBackend())
    path = write_pipeline(
        f"model: {model_2k}\nsections:\n  - {{id: a, prompt: Write., target_words: 3000}}\n"
    )
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err.splitlines()
    loading = err.index(f"loading {model_2k} ...")
    assert err[loading - 1].startswith("warning: sections.a: a target of 3000 words may not")
