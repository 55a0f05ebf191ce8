"""An OpenAI Batch API input file, read and checked line by line: each line is a request
(`custom_id`, `method`, `url`, `body`) or the reason it cannot be one, which becomes that
line's entry in the errors file while the other lines run. A file with no request in it at
all (not readable, not UTF-8, not JSON Lines, empty) is a ConfigError at FILE:LINE:COL."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gen.errors import ConfigError
from gen.pipeline.records import read_text
from gen.pipeline.snippet import located_error
from gen.values import described

ENDPOINTS = ("/v1/chat/completions", "/v1/completions")


@dataclass(frozen=True, slots=True)
class LineError:
    """Why a line is no request, as OpenAI's batch errors say it: a code
    (`invalid_json_line`, `missing_required_parameter`, `duplicate_custom_id`,
    `invalid_value`), a message and the parameter it is about."""

    code: str
    message: str
    param: str | None = None
    col: int = 1


@dataclass(frozen=True, slots=True)
class BatchRequest:
    """One line of the file: `problem` is None where it is a request to run."""

    line: int
    custom_id: str | None = None
    url: str = ""
    body: Any = None
    problem: LineError | None = None


def read_requests(path: Path) -> list[BatchRequest]:
    """Every non-blank line of `path`, checked. Raises ConfigError where not one line is a
    request (the file is not one of OpenAI's batch files): at the first line's problem."""
    file = str(path)
    text = read_text(path, "requests")
    lines = text.removeprefix("\ufeff").split("\n")  # JSON strings may hold U+2028
    requests: list[BatchRequest] = []
    first: dict[str, int] = {}  # custom_id: the line that holds it
    for number, line in enumerate(lines, 1):
        if line.strip():
            request = _request(number, line, first)
            if request.problem is None and request.custom_id is not None:
                first[request.custom_id] = number
            requests.append(request)
    if not requests:
        raise ConfigError(f"{file}: there are no requests in it (an empty file)")
    problems = [(r.line, r.problem) for r in requests if r.problem is not None]
    if len(problems) == len(requests):
        number, problem = problems[0]
        message = f"not an OpenAI batch file: {problem.message}"
        error = located_error(message, file, lines, number, problem.col, 1, ConfigError)
        others = len(requests) - 1
        if others:
            rest = "its other line" if others == 1 else f"any of its other {others} lines"
            error.notes = (f"(nor is {rest} a request)",)
        raise error
    return requests


def _request(number: int, line: str, first: dict[str, int]) -> BatchRequest:
    try:
        data = json.loads(line, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        message = f"not valid JSON: {exc.msg} (column {exc.colno})"
        bad = LineError("invalid_json_line", message, col=exc.colno)
        return BatchRequest(number, problem=bad)
    except (ValueError, RecursionError) as exc:  # 4300 digits, NaN, nested past the stack
        return BatchRequest(number, problem=LineError("invalid_json_line", f"not JSON: {exc}"))
    if not isinstance(data, dict):
        got = described(data, json=True)
        message = f"a request must be a JSON object, got {got}"
        return BatchRequest(number, problem=LineError("invalid_json_line", message))
    custom_id = data.get("custom_id")
    if custom_id is not None and not isinstance(custom_id, str):
        got = described(custom_id, json=True)
        message = f"custom_id must be a string, got {got}"
        return BatchRequest(number, problem=LineError("invalid_value", message, "custom_id"))
    if custom_id is not None and not _is_text(custom_id):
        message = "custom_id holds a lone surrogate, which is not a character"
        return BatchRequest(number, problem=LineError("invalid_value", message, "custom_id"))
    problem = _problem(data, custom_id or "", first)
    return BatchRequest(number, custom_id, data.get("url", ""), data.get("body"), problem)


def _problem(data: dict[str, Any], custom_id: str, first: dict[str, int]) -> LineError | None:
    for name in ("custom_id", "method", "url", "body"):
        if data.get(name) in (None, ""):
            message = f"{name} is required"
            return LineError("missing_required_parameter", message, name)
    if custom_id in first:
        message = (
            f"custom_id {custom_id!r} is already on line {first[custom_id]}; "
            f"each request needs its own"
        )
        return LineError("duplicate_custom_id", message, "custom_id")
    if data["method"] != "POST":
        got = _shown(data["method"])
        return LineError("invalid_value", f"method must be POST, got {got}", "method")
    if data["url"] not in ENDPOINTS:
        runs = " and ".join(ENDPOINTS)
        message = f"url must be one of the endpoints gen runs ({runs}), got {_shown(data['url'])}"
        return LineError("invalid_value", message, "url")
    return None


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(value: Any) -> str:
    if isinstance(value, str) and len(value) <= 80:
        return repr(value)
    return described(value, json=True)


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")
