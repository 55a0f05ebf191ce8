"""Every file in broken/ must fail to load with a located error that matches its header:
`# expect: [FILE:]LINE[:COL] substring of the message`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gen.errors import ConfigError
from gen.pipeline import load_pipeline

BROKEN = Path(__file__).parent / "broken"
HEADER = re.compile(
    r"^# expect: (?:(?P<file>[^\s:]*[A-Za-z_][^\s:]*):)?"  # a file other than the pipeline
    r"(?P<line>\d+)(?::(?P<col>\d+))? (?P<text>.+)$"
)
CASES = sorted(BROKEN.glob("*.yaml"))


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 18


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_broken_pipeline_fails_located(path: Path) -> None:
    header = HEADER.match(path.read_text(encoding="utf-8").splitlines()[0])
    assert header, f"{path.name}: first line must be '# expect: LINE[:COL] text'"
    with pytest.raises(ConfigError) as info:
        load_pipeline(path)
    err = info.value
    expected_file = BROKEN / header["file"] if header["file"] else path
    assert err.file is not None
    assert Path(err.file).resolve() == expected_file.resolve()
    assert err.line == int(header["line"]), str(err)
    if header["col"]:
        assert err.col == int(header["col"]), str(err)
    assert header["text"] in err.message
    # the message a user sees: FILE:LINE:COL: message, then the numbered line and a caret
    text = str(err)
    assert text.startswith(f"{err.file}:{err.line}:{err.col}: ")
    source_line = expected_file.read_text(encoding="utf-8").splitlines()[err.line - 1 :]
    numbered = f"{err.line} | {source_line[0] if source_line else ''}"
    assert numbered in text
    caret_line = text.splitlines()[-1]
    gutter = " " * len(str(err.line)) + " | "
    assert caret_line.startswith(gutter)
    assert caret_line[len(gutter) :].lstrip(" \t").startswith("^")
    assert len(caret_line[len(gutter) :].split("^")[0]) == (err.col or 1) - 1
    assert "Traceback" not in text and "pydantic" not in text
