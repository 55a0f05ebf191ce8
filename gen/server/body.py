"""A request body as a JSON object, or a 400 naming what is wrong and where: not UTF-8,
not JSON, not an object, nested past MAX_DEPTH, a number no float or int can hold (1e400,
NaN, 5000 digits), or a lone surrogate (`"\\ud800"`, which no UTF-8 text can carry)."""

from __future__ import annotations

import json
import math
from typing import Any

from gen.server.errors import APIError
from gen.values import described

MAX_DEPTH = 100  # far past any request's shape, far inside Python's recursion limit
_CONSTANTS = ("NaN", "Infinity", "-Infinity")  # Python's json reads them; JSON has none


class _Unheld:
    """A number in the body that Python cannot hold as given: kept as its text so that the
    walk can name the parameter it was sent for."""

    def __init__(self, text: str) -> None:
        self.text = text


def _int(text: str) -> int | _Unheld:
    try:
        return int(text)
    except ValueError:  # past sys.get_int_max_str_digits()
        return _Unheld(text)


def _float(text: str) -> float | _Unheld:
    value = float(text)
    return value if math.isfinite(value) else _Unheld(text)


def _path(parts: tuple[str | int, ...]) -> str:
    return ".".join(str(p) for p in parts)


def _error(parts: tuple[str | int, ...], problem: str) -> APIError:
    param = _path(parts) or None
    where = f"{param}: " if param else "the body: "
    return APIError(400, f"{where}{problem}", param=param, code="invalid_value")


def _check_text(text: str, parts: tuple[str | int, ...], what: str = "the text") -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        problem = f"{what} holds a lone surrogate \\u{code:04x}, which is not a character"
        raise _error(parts, problem) from None


def _number_problem(text: str) -> str:
    if text in _CONSTANTS:
        return f"{text} is not a JSON number"
    if "." in text or "e" in text.lower():
        return f"{text[:40]} is out of range (a number must be finite)"
    return f"an integer of {len(text.lstrip('-'))} digits is out of range"


def _check(data: Any) -> None:
    """Walk the parsed body (without recursion) for what Python took but nothing after it
    should: the first problem, named by its path (`messages.0.content`)."""
    todo: list[tuple[Any, tuple[str | int, ...]]] = [(data, ())]
    while todo:
        value, parts = todo.pop()
        if isinstance(value, _Unheld):
            raise _error(parts, _number_problem(value.text))
        if isinstance(value, str):
            _check_text(value, parts)
        elif isinstance(value, dict | list):
            if len(parts) >= MAX_DEPTH:
                raise _error(parts[:1], f"nested more than {MAX_DEPTH} levels deep")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str):
                    _check_text(key, parts, "a key")
                todo.append((item, (*parts, key)))


def parse_json(raw: bytes) -> dict[str, Any]:
    """A request body as a JSON object, else a 400."""
    try:
        data = json.loads(raw, parse_int=_int, parse_float=_float, parse_constant=_Unheld)
    except UnicodeDecodeError as exc:
        raise APIError(
            400, f"the body is not UTF-8: byte {exc.start} is {raw[exc.start]:#04x}",
            code="invalid_json",
        ) from None  # fmt: skip
    except json.JSONDecodeError as exc:
        raise APIError(400, f"the body is not valid JSON: {exc}", code="invalid_json") from None
    except RecursionError:
        raise APIError(
            400, f"the body is nested more than {MAX_DEPTH} levels deep", code="invalid_json"
        ) from None
    if not isinstance(data, dict):
        got = described(data, json=True)
        raise APIError(400, f"the body must be a JSON object, got {got}", code="invalid_json")
    _check(data)
    return data
