"""The output and errors files: whole lines appended, a torn last line cut off on the next
read, a line that is no entry refused, and the lines sorted at the end."""

from __future__ import annotations

from pathlib import Path

import pytest

from gen.errors import ConfigError
from gen.server.batch import ResultFile, error_entry, response_entry, succeeded


def answered(custom_id: str) -> dict[str, object]:
    return response_entry(custom_id, 200, {"object": "chat.completion", "text": "你好 🙂"})


def test_entries_are_whole_lines_of_utf8_in_openais_shape(tmp_path: Path) -> None:
    results = ResultFile(tmp_path / "out.jsonl")
    first, second = answered("a"), error_entry("b", "invalid_json_line", "not JSON", line=3)
    results.append(first)
    results.append(second)
    raw = results.path.read_text(encoding="utf-8")
    assert raw.count("\n") == 2 and raw.endswith("\n") and "你好 🙂" in raw
    assert results.read() == [first, second]
    assert set(first) == {"id", "custom_id", "response", "error"}
    assert str(first["id"]).startswith("batch_req_")
    assert first["response"]["status_code"] == 200  # type: ignore[index]
    assert str(first["response"]["request_id"]).startswith("req_")  # type: ignore[index]
    assert second["response"] is None
    assert second["error"] == {
        "code": "invalid_json_line", "message": "not JSON", "param": None, "line": 3
    }  # fmt: skip
    assert succeeded(first) and not succeeded(second)
    assert not succeeded(response_entry("c", 400, {"error": {}}))


@pytest.mark.parametrize(
    "torn",
    [b'{"id": "batch_req_x", "custom_id": "c", "resp', b'{"id": "batch_req_x", "cus\n'],
    ids=["no newline", "unreadable last line"],
)
def test_a_torn_last_line_is_cut_off(tmp_path: Path, torn: bytes) -> None:
    results = ResultFile(tmp_path / "out.jsonl")
    results.append(answered("a"))
    results.append(answered("b"))
    whole = results.path.read_bytes()
    results.path.write_bytes(whole + torn)
    assert [e["custom_id"] for e in results.read()] == ["a", "b"]
    assert results.path.read_bytes() == whole
    results.append(answered("c"))
    assert [e["custom_id"] for e in results.read()] == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("content", "line"),
    [
        (b'{"custom_id": "a"}\n{"topic": "tea"}\n{"custom_id": "b"}\n', 2),
        (b'{"custom_id": "a"}\n{"topic": "tea"}\n', 2),  # a last line, but not one of ours
        (b"notes without a newline", 1),  # no torn line either: another file
    ],
)
def test_a_line_that_is_no_entry_is_refused_not_cut(
    tmp_path: Path, content: bytes, line: int
) -> None:
    path = tmp_path / "out.jsonl"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=rf"out.jsonl:{line}: not a line of an OpenAI batch"):
        ResultFile(path).read()
    assert path.read_bytes() == content


def test_sort_rewrites_only_when_the_order_changes(tmp_path: Path) -> None:
    results = ResultFile(tmp_path / "out.jsonl")
    for custom_id in ("c", "a", "b"):
        results.append(answered(custom_id))
    entries = {e["custom_id"]: e for e in results.read()}
    order = {"a": 1, "b": 2, "c": 3}
    results.sort(lambda e: order[e["custom_id"]])
    assert results.read() == [entries["a"], entries["b"], entries["c"]]
    mtime = results.path.stat().st_mtime_ns
    results.sort(lambda e: order[e["custom_id"]])
    assert results.path.stat().st_mtime_ns == mtime
    assert not list(tmp_path.glob(".*.tmp"))
