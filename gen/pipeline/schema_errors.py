"""Turn a pydantic ValidationError into one ConfigError located at the offending key or value.

The message names the path and the value: `sections[2].max_tokens: must be > 0, got -3`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from gen.errors import ConfigError
from gen.pipeline.spec import ContextSettings, DocumentSpec, GenerationSettings, Pipeline, Section
from gen.pipeline.suggest import closest, did_you_mean
from gen.pipeline.yaml_loader import SourceMap, YamlPath, format_path
from gen.values import described

MORE_ERRORS = 2  # further errors listed after the first, one line each
_TYPE_WORDS = {
    "int": "an integer",
    "float": "a number",
    "string": "a string",
    "bool": "true or false",
    "list": "a list",
    "dict": "a mapping",
    "model": "a mapping",
    "model_attributes": "a mapping",
}
_COMPARISONS = {
    "greater_than": ("gt", ">"),
    "greater_than_equal": ("ge", ">="),
    "less_than": ("lt", "<"),
    "less_than_equal": ("le", "<="),
}


def schema_error(exc: ValidationError, data: Any, smap: SourceMap) -> ConfigError:
    """The first error in file order, located, then up to MORE_ERRORS others a line each
    and a count of the rest. A key reported missing that an unknown key's "did you mean"
    names is the same mistake (`section:` for `sections:`), so it is left out."""
    located = [(_data_path(err, data), err) for err in exc.errors(include_url=False)]
    meant = {
        (path[:-1], _closest(str(path[-1]), path[:-1]))
        for path, err in located
        if err["type"] == "extra_forbidden"
    }
    located = [
        (path, err)
        for path, err in located
        if err["type"] != "missing" or (path, err["loc"][-1]) not in meant
    ]

    def where(item: tuple[YamlPath, ErrorDetails]) -> tuple[int, int]:
        path, err = item
        span = smap.key_span(path) if _at(err) == "key" else smap.value_span(path)
        return span.line, span.col

    located.sort(key=where)
    path, err = located[0]
    error = smap.error(path, _message(path, err), at=_at(err))
    notes = []
    for item in located[1 : 1 + MORE_ERRORS]:
        line, col = where(item)
        notes.append(f"{smap.file}:{line}:{col}: {_message(*item)}")
    rest = len(located) - 1 - len(notes)
    if rest:
        notes.append(f"(and {rest} more error{'s' if rest > 1 else ''})")
    error.notes = tuple(notes)
    return error


def describe(err: ErrorDetails) -> str:
    """What is wrong with one value, without its path: 'must be > 0, got -3'."""
    return _describe(err["type"], err.get("ctx") or {}, err.get("input"), err["msg"])


def _at(err: ErrorDetails) -> Literal["key", "value"]:
    return "key" if err["type"] == "extra_forbidden" else "value"


def _data_path(err: ErrorDetails, data: Any) -> YamlPath:
    """pydantic's loc without its union/validator tags: only steps that exist in the data."""
    path: list[Any] = []
    node = data
    loc = err["loc"]
    for i, step in enumerate(loc):
        if _has(node, step):
            path.append(step)
            node = node[step]
        elif i == len(loc) - 1 and err["type"] in ("missing", "extra_forbidden"):
            path.append(step)
    if err["type"] == "missing" and path and path[-1] == loc[-1]:
        path.pop()  # point at the mapping that lacks the key
    return tuple(path)


def _has(node: Any, step: Any) -> bool:
    if isinstance(node, dict):
        return step in node
    return isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node)


def _message(path: YamlPath, err: ErrorDetails) -> str:
    kind = err["type"]
    if kind == "missing":
        prefix = f"{format_path(path)}: " if path else ""
        return f"{prefix}missing required key '{err['loc'][-1]}'"
    if kind == "extra_forbidden":
        key, parent = path[-1], path[:-1]
        prefix = f"{format_path(parent)}: unknown key" if parent else "unknown top-level key"
        return f"{prefix} {key!r}{_suggest(str(key), parent)}"
    return f"{format_path(path)}: {describe(err)}"


def _describe(kind: str, ctx: dict[str, Any], got: Any, msg: str) -> str:
    if kind in _COMPARISONS:
        name, symbol = _COMPARISONS[kind]
        return f"must be {symbol} {ctx[name]}, got {described(got)}"
    if kind.endswith(("_type", "_parsing")):
        base = kind.rsplit("_", 1)[0]
        if base in _TYPE_WORDS:
            return f"must be {_TYPE_WORDS[base]}, got {described(got)}"
    if kind == "literal_error":
        return f"must be one of {ctx['expected']}, got {described(got)}"
    if kind == "value_error":
        return str(ctx.get("error", msg))
    if kind == "too_short" and ctx.get("min_length") == 1:
        return "must not be empty"
    return f"{msg[:1].lower()}{msg[1:]}, got {described(got)}"


def _suggest(key: str, parent: YamlPath) -> str:
    model = _model_at(parent)
    if model is None:
        return ""
    allowed = list(model.model_fields)
    return did_you_mean(key, allowed, f"; allowed keys: {', '.join(allowed)}")


def _closest(key: str, parent: YamlPath) -> str | None:
    model = _model_at(parent)
    return None if model is None else closest(key, model.model_fields)


def _model_at(path: YamlPath) -> type[BaseModel] | None:
    if path == ():
        return Pipeline
    if len(path) == 2 and path[0] == "sections":
        return Section
    by_path: dict[YamlPath, type[BaseModel]] = {
        ("defaults",): GenerationSettings,
        ("context",): ContextSettings,
        ("document",): DocumentSpec,
    }
    return by_path.get(tuple(path))
