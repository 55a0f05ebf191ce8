"""`gen run` and `gen batch` with a section that failed (it kept looping), in process with
a scripted backend: the summary says how many failed and why; `--strict` and
`strict: true` make the exit code 1 after everything is written as usual."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gen.cli import main
from tests.pipeline.fake_backend import FakeBackend, Reply, install
from tests.pipeline.run.test_loops import LOOP_EN, SOUND_EN

PIPELINE = """\
name: strictly
inputs: {topic: signals}
defaults: {max_tokens: 50, max_rounds: 2, temperature: 0.7, seed: 3}
sections:
  - id: body
    prompt: "[{{ topic }}] Write about {{ topic }}."
"""
LOOPING: list[Reply] = [(SOUND_EN + LOOP_EN, "length")] + [(" " + LOOP_EN, "length")] * 2


def write(tmp_path: Path, strict: str = "") -> Path:
    path = tmp_path / "strictly.yaml"
    path.write_text(strict + PIPELINE, encoding="utf-8")
    return path


def gen_run(
    capsys: pytest.CaptureFixture[str], path: Path, *args: str
) -> tuple[int, list[str], list[str]]:
    """`gen run PATH --out OUT ARGS...` -> (exit code, stdout lines, stderr lines)."""
    code = main(["run", str(path), "--out", str(path.parent / "out"), *args])
    stdout, stderr = capsys.readouterr()
    return code, stdout.splitlines(), stderr.splitlines()


def summary(stderr: list[str]) -> str:
    (line,) = [s for s in stderr if s.startswith(("completed: ", "failed: "))]
    return line


def test_the_summary_line_says_how_many_sections_failed_and_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install(monkeypatch, FakeBackend({"signals": list(LOOPING)}))
    code, out, err = gen_run(capsys, write(tmp_path))
    assert code == 0  # not strict: a failed section is reported, the run succeeds
    assert summary(err).startswith("completed: 1 sections, 1 failed (loops: 1), ")
    assert "strict" not in summary(err)
    assert Path(out[-1]).name == "document.md"


def test_a_run_without_failed_sections_says_nothing_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install(monkeypatch, FakeBackend())
    code, _, err = gen_run(capsys, write(tmp_path), "--strict")
    assert code == 0
    assert summary(err).startswith("completed: 1 sections, 3 words, ")  # "Text of signals."
    assert "failed" not in summary(err) and "strict" not in summary(err)


@pytest.mark.parametrize(("flag", "yaml"), [("--strict", ""), (None, "strict: true\n")])
def test_strict_exits_1_when_a_section_failed_after_writing_everything(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flag: str | None,
    yaml: str,
) -> None:
    install(monkeypatch, FakeBackend({"signals": list(LOOPING)}))
    code, out, err = gen_run(capsys, write(tmp_path, yaml), *([flag] if flag else []))
    assert code == 1
    assert summary(err).startswith("completed: 1 sections, 1 failed (loops: 1), ")
    assert summary(err).endswith("; strict mode fails the run")
    document = Path(out[-1])  # the document is written and named as usual
    manifest = json.loads((document.parent / "manifest.json").read_text("utf-8"))
    assert manifest["status"] == "completed"  # the manifest's status is left as it is
    assert manifest["metrics"]["failed_reasons"] == {"loops": 1}
    assert "The signal box stood beside the line" in document.read_text("utf-8")


def test_strict_must_be_true_or_false(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    opened = install(monkeypatch, FakeBackend())
    path = write(tmp_path, 'strict: "yes"\n')
    code, out, err = gen_run(capsys, path)
    assert code == 2 and out == [] and opened == []
    assert err[0] == f"{path}:1:9: strict: must be true or false, got 'yes'"


def gen_batch(
    capsys: pytest.CaptureFixture[str], path: Path, *args: str
) -> tuple[int, list[str], list[str]]:
    records = path.parent / "topics.csv"
    records.write_text("id,topic\nt1,tea\nt2,signals\n", encoding="utf-8")
    out = path.parent / "out"
    code = main(["batch", str(path), "-i", str(records), "--key", "id", "-o", str(out), *args])
    stdout, stderr = capsys.readouterr()
    return code, stdout.splitlines(), stderr.splitlines()


@pytest.mark.parametrize(
    ("args", "yaml", "code"),
    [((), "", 0), (("--strict",), "", 1), ((), "strict: true\n", 1)],
)
def test_batch_strict_exits_1_when_a_record_had_a_failed_section(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: tuple[str, ...],
    yaml: str,
    code: int,
) -> None:
    install(monkeypatch, FakeBackend({"signals": list(LOOPING)}))
    got, out, err = gen_batch(capsys, write(tmp_path, yaml), *args)
    assert got == code
    assert Path(out[-1]).name == "batch.json"
    verdict = "; strict mode fails the batch" if code else ""
    assert f"2 of 2 records completed; 0 failed; 1 with failed sections{verdict}" in err
    assert "  ! t2: 1 section failed (loops: 1)" in err
    # the record's own progress line says it too
    assert any("✓ t2: " in line and ", 1 section failed (loops: 1) (" in line for line in err)
