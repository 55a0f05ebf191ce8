"""Batch records: CSV, JSONL and YAML lists, each record with its line and a key; records
the file cannot give are kept with their error."""

from __future__ import annotations

from pathlib import Path

import pytest

from gen.errors import ConfigError
from gen.pipeline.records import read_records


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_rows_with_their_lines_and_keys(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "r.csv",
        'id,topic\nA 1,"two\nlines 茶"\nA 1,ไทย 😀\nb,x,extra\nc\n',
    )
    records = read_records(path, "id")
    assert [(r.line, r.key) for r in records] == [(2, "a-1"), (4, "a-1-2"), (5, "b"), (6, "c")]
    assert records[0].fields == {"id": "A 1", "topic": "two\nlines 茶"}
    assert records[1].fields["topic"] == "ไทย 😀"
    assert records[2].error == "1 more cells than the header has columns"
    assert records[3].error == "fewer cells than the header has columns"


def test_jsonl_keeps_types_and_bad_lines(tmp_path: Path) -> None:
    path = write(tmp_path, "r.jsonl", '{"topic": "茶", "n": 3}\n\nnope\n[1]\n{"topic": "x"}\n')
    records = read_records(path)
    assert [(r.line, r.key) for r in records] == [
        (1, "0001"),
        (3, "0002"),
        (4, "0003"),
        (5, "0004"),
    ]
    assert records[0].fields == {"topic": "茶", "n": 3}
    assert records[1].error is not None and records[1].error.startswith("not JSON")
    assert records[2].error == "a record must be a JSON object, got list"


def test_yaml_list_and_a_missing_key(tmp_path: Path) -> None:
    path = write(tmp_path, "r.yaml", "- topic: 茶\n  id: t\n- topic: sea\n- just text\n")
    records = read_records(path, "id")
    assert [(r.line, r.key) for r in records] == [(1, "t"), (3, "0002"), (4, "0003")]
    assert records[1].error == "--key id: the record has no 'id'"
    assert records[2].error == "a record must be a mapping, got str"


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("r.txt", "a", "must be a .csv, .jsonl or .yaml file"),
        ("r.csv", "", "there are no records"),
        ("r.csv", "topic,\nx,y\n", "r.csv:1: column 2 has no name"),
        ("r.yaml", "topic: x\n", "must be a YAML list of mappings"),
    ],
)
def test_files_that_hold_no_records(tmp_path: Path, name: str, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        read_records(write(tmp_path, name, text))


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="records file not found"):
        read_records(tmp_path / "none.csv")
