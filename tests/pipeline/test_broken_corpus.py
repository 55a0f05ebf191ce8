"""Every file in broken/ must fail to load with a located error that matches its header:
`# expect: [FILE:]LINE[:COL] substring of the message`. The checks are those of
`gen validate` (load_pipeline, a trial render of every template, then the model checks);
`gen validate` and `gen run` on each file exit 2 with `FILE:LINE:COL` and never reach a
model."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Any

import pytest

import gen.backends
from gen.cli import main
from gen.errors import ConfigError
from gen.models import store
from gen.pipeline import load_pipeline
from gen.pipeline.model_check import check_model
from gen.pipeline.templates.trial import trial_render

BROKEN = Path(__file__).parent / "broken"
HEADER = re.compile(
    r"^# expect: (?:(?P<file>[^\s:]*[A-Za-z_][^\s:]*):)?"  # a file other than the pipeline
    r"(?P<line>\d+)(?::(?P<col>\d+))? (?P<text>.+)$"
)
CASES = sorted(BROKEN.glob("*.yaml"))
# what a snippet shows for a control character: its Unicode picture (tab stays a tab)
PICTURES = {c: 0x2400 + c for c in range(0x20) if c != 0x09} | {0x7F: 0x2421}


def expectation(path: Path) -> tuple[Path, int, int | None, str]:
    """(file, line, col, text) from the case's first line."""
    first = path.read_bytes().split(b"\n", 1)[0].decode("utf-8")
    header = HEADER.match(first)
    assert header, f"{path.name}: first line must be '# expect: LINE[:COL] text'"
    file = BROKEN / header["file"] if header["file"] else path
    col = int(header["col"]) if header["col"] else None
    return file, int(header["line"]), col, header["text"]


def shown_line(file: Path, line: int) -> str:
    """The source line as the snippet must show it: undecodable bytes as U+FFFD."""
    lines = file.read_bytes().decode("utf-8", errors="replace").splitlines()
    return lines[line - 1].translate(PICTURES) if line <= len(lines) else ""


def cells(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 18


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_broken_pipeline_fails_located(path: Path) -> None:
    expected_file, line, col, text = expectation(path)
    with pytest.raises(ConfigError) as info:
        pipeline = load_pipeline(path)
        trial_render(pipeline)
        check_model(pipeline)
    err = info.value
    assert err.file is not None
    assert Path(err.file).resolve() == expected_file.resolve()
    assert err.line == line, str(err)
    if col is not None:
        assert err.col == col, str(err)
    assert text in err.message
    # the message a user sees: FILE:LINE:COL: message, then the numbered line and a caret
    # under the column, counted in terminal cells (a CJK character takes two)
    shown = str(err).splitlines()
    assert shown[0].startswith(f"{err.file}:{err.line}:{err.col}: ")
    source = shown_line(expected_file, err.line)
    numbered = shown.index(f"{err.line} | {source}")
    gutter = " " * len(str(err.line)) + " | "
    caret_line = shown[numbered + 1]
    assert caret_line.startswith(gutter)
    assert caret_line[len(gutter) :].lstrip(" \t").startswith("^")
    indent = caret_line[len(gutter) :].split("^")[0]
    assert cells(indent.replace("\t", " ")) == cells(source[: (err.col or 1) - 1])
    assert "Traceback" not in str(err) and "pydantic" not in str(err)


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_cli_refuses_before_any_model_loads(
    path: Path,
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    loaded: list[Any] = []

    def no_model(*args: Any, **kwargs: Any) -> Any:
        loaded.append(args)
        raise AssertionError("a model was loaded for a broken pipeline")

    monkeypatch.setattr(gen.backends, "open_backend", no_model)
    monkeypatch.setattr(store, "prepare", no_model)
    out = tmp_path / "out"
    args = [command, str(path)] + (["--out", str(out)] if command == "run" else [])
    code = main(args)
    stdout, stderr = capsys.readouterr()
    expected_file, line, col, text = expectation(path)
    assert code == 2 and stdout == ""
    location, _, message = stderr.splitlines()[0].partition(f":{line}:{col or ''}")
    assert Path(location).resolve() == expected_file.resolve(), stderr
    assert text in message
    assert "Traceback" not in stderr
    assert loaded == [] and not out.exists()
