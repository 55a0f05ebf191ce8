"""The model checked before it loads: a `model:` path that is missing points into the file,
a `--model` that is missing names the option, and context.reserve must leave room for a
prompt in the model's context length (read from config.json here, without weights)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gen.cli import main
from gen.errors import ConfigError, ModelError
from gen.pipeline import load_pipeline
from gen.pipeline.model_check import check_model
from tests.pipeline.conftest import WritePipeline
from tests.pipeline.fake_backend import FakeBackend, install


@pytest.fixture
def small_model(tmp_path: Path) -> Path:
    """A Hugging Face folder whose config.json says 64 tokens; its weights are never read."""
    folder = tmp_path / "小模型"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"max_position_embeddings": 64}), "utf-8")
    (folder / "model.safetensors").write_bytes(b"")
    return folder


@pytest.mark.parametrize(
    "context",
    ["{window: auto, reserve: 64}", "{window: 4096, reserve: 100}"],
    ids=["auto", "larger than the model"],
)
def test_reserve_must_fit_the_models_context_length(
    write_pipeline: WritePipeline, small_model: Path, context: str
) -> None:
    path = write_pipeline(
        f"model: {small_model}\ncontext: {context}\nsections:\n  - {{id: a, prompt: A}}\n"
    )
    expected = "leave none for the prompt: the model's context length is 64 tokens"
    with pytest.raises(ConfigError, match=expected) as info:
        check_model(load_pipeline(path))
    assert (info.value.line, info.value.col) == (2, 34)  # the reserve's value


def test_a_reserve_that_fits_passes(write_pipeline: WritePipeline, small_model: Path) -> None:
    path = write_pipeline(
        f"model: {small_model}\ncontext: {{reserve: 63}}\nsections:\n  - {{id: a, prompt: A}}\n"
    )
    check_model(load_pipeline(path))
    remote = write_pipeline(
        "model: openai:gpt-x\ncontext: {reserve: 100000}\nsections:\n  - {id: a, prompt: A}\n"
    )
    check_model(load_pipeline(remote))  # a remote model's window is known only when it answers


def test_the_model_option_is_checked_instead_of_the_files(
    write_pipeline: WritePipeline, small_model: Path
) -> None:
    path = write_pipeline(
        "model: ./gone/模型.gguf\ncontext: {reserve: 64}\nsections:\n  - {id: a, prompt: A}\n"
    )
    with pytest.raises(ModelError, match=r"^--model: \./nope\.gguf: no such GGUF file$"):
        check_model(load_pipeline(path), "./nope.gguf")
    with pytest.raises(ConfigError, match="context length is 64"):
        check_model(load_pipeline(path), str(small_model))  # --model replaces the file's


def test_gen_run_with_a_missing_model_option_exits_2_before_loading(
    write_pipeline: WritePipeline,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    opened = install(monkeypatch, FakeBackend())
    path = write_pipeline("sections:\n  - {id: a, prompt: A}\n")
    args = ["run", str(path), "--out", str(tmp_path / "out"), "--model", "models/不在.gguf"]
    assert main(args) == 2
    assert capsys.readouterr().err == "error: --model: models/不在.gguf: no such GGUF file\n"
    assert opened == [] and not (tmp_path / "out").exists()


def test_gen_validate_checks_the_model_without_importing_torch() -> None:
    code = (
        "import sys\n"
        "from gen.cli import main\n"
        "assert main(['validate', 'pipelines/quickstart.yaml']) == 0\n"
        "assert 'gen.models.store' in sys.modules  # the model was checked\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])
