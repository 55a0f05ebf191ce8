"""Reading an OpenAI Batch input file: each line a request or its own error (the rest still
run); a file with no request in it at all a located ConfigError."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gen.errors import ConfigError
from gen.server.batch import read_requests

CHAT = {"messages": [{"role": "user", "content": "你好 🙂"}], "max_tokens": 4}


def line(custom_id: object = "a", **fields: object) -> str:
    data = {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": CHAT}
    data.update(fields)
    return json.dumps({k: v for k, v in data.items() if v is not None}, ensure_ascii=False)


def write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "requests.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_each_line_is_a_request_or_the_reason_it_is_not(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "\ufeff" + line("chat"),
        line("text", url="/v1/completions", body={"prompt": "海"}),
        '{"custom_id": "cut", "method": "POST", "url": ',
        "",
        "[1, 2]",
        line(None),
        line(7),
        line("chat"),
        line("get", method="GET"),
        line("embed", url="/v1/embeddings"),
        line("empty", body=None),
        line("stringy", body="not an object"),
    )
    requests = read_requests(path)
    got = [(r.line, r.custom_id, r.problem and (r.problem.code, r.problem.param)) for r in requests]
    assert got == [
        (1, "chat", None),
        (2, "text", None),
        (3, None, ("invalid_json_line", None)),
        (5, None, ("invalid_json_line", None)),  # blank line 4 skipped
        (6, None, ("missing_required_parameter", "custom_id")),
        (7, None, ("invalid_value", "custom_id")),
        (8, "chat", ("duplicate_custom_id", "custom_id")),
        (9, "get", ("invalid_value", "method")),
        (10, "embed", ("invalid_value", "url")),
        (11, "empty", ("missing_required_parameter", "body")),
        (12, "stringy", None),  # the app answers it (400: the body must be an object)
    ]
    assert requests[0].body == CHAT and requests[0].url == "/v1/chat/completions"
    assert requests[1].body == {"prompt": "海"}
    assert requests[2].problem is not None and requests[2].problem.col == 47
    assert "already on line 1" in str(requests[6].problem)


def test_a_file_that_is_no_batch_file_is_a_located_error(tmp_path: Path) -> None:
    pretty = tmp_path / "pretty.jsonl"
    pretty.write_text(json.dumps([json.loads(line())], indent=2), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        read_requests(pretty)
    err = caught.value
    assert (err.file, err.line, err.col) == (str(pretty), 1, 2)
    assert "not an OpenAI batch file" in str(err) and err.snippet and "^" in err.snippet

    records = write(tmp_path, '{"topic": "茶"}', '{"topic": "rain"}')
    with pytest.raises(ConfigError, match=r"requests.jsonl:1:1: not an OpenAI batch file: "
                       r"custom_id is required"):  # fmt: skip
        read_requests(records)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\n  \n", r"there are no requests in it"),
        (b'{"custom_id": "a"}\n\xff\n', r"bad.jsonl:2:1: invalid UTF-8"),
    ],
)
def test_whole_file_errors(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=message):
        read_requests(path)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"requests file not found: .*nowhere.jsonl"):
        read_requests(tmp_path / "nowhere.jsonl")
    with pytest.raises(ConfigError, match="cannot read the requests"):
        read_requests(tmp_path)
