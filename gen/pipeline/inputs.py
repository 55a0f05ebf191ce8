"""`--set KEY=VALUE` and batch records: override declared inputs, typed like their defaults."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from gen.errors import ConfigError
from gen.pipeline.suggest import did_you_mean
from gen.pipeline.yaml_loader import MAX_DEPTH, SourceMap, load_yaml

_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


def apply_overrides(
    inputs: dict[str, Any], overrides: Mapping[str, object], smap: SourceMap
) -> dict[str, Any]:
    """A copy of `inputs` with `overrides`; strings are converted to the default's type."""
    out = dict(inputs)
    for key, raw in overrides.items():
        if key not in inputs:
            declared = (
                f"declared: {', '.join(inputs)}" if inputs else "the pipeline declares no inputs"
            )
            tip = did_you_mean(key, inputs, f"; {declared}")
            raise smap.error(("inputs",), f"--set {shorten(key)}: unknown input{tip}", at="key")
        try:
            out[key] = coerce(raw, inputs[key])
        except ValueError as exc:
            message = f"--set {key}={shorten(raw)}: {exc}"
            raise smap.error(("inputs", key), message, at="key") from None
    return out


def shorten(value: object, limit: int = 60) -> str:
    """A value for a message: a 10 MB record field is shown by its start, and what is not
    UTF-8 (a lone surrogate from argv) as an escape, so the message can be written anywhere."""
    text = str(value)
    if len(text) > limit:
        text = f"{text[: limit - 3]}... ({len(text):,} characters)"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def unusable(value: object) -> str | None:
    """Why a value from outside a YAML file (--set, a batch record, a request) cannot be an
    input, or None: text must be UTF-8 (argv carries an undecodable byte as a lone
    surrogate), numbers finite (JSON has no NaN), nesting at most MAX_DEPTH deep."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"it is nested more than {MAX_DEPTH} deep"
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                code = ord(item[exc.start])
                return f"it is not valid UTF-8 text (U+{code:04X} at character {exc.start + 1})"
        elif isinstance(item, float) and not math.isfinite(item):
            return f"{item} is not a number JSON can hold; give a finite number"
        elif isinstance(item, Mapping):
            stack += [(k, depth + 1) for k in item] + [(v, depth + 1) for v in item.values()]
        elif isinstance(item, list | tuple):
            stack += [(v, depth + 1) for v in item]
    return None


def coerce(raw: object, default: Any) -> Any:
    """`raw` as the type of `default`: bool, int, float, list or mapping (YAML flow syntax)."""
    if not isinstance(raw, str) or default is None or isinstance(default, str):
        return raw
    if isinstance(default, bool):
        if raw.strip().lower() in _TRUE | _FALSE:
            return raw.strip().lower() in _TRUE
        raise ValueError(f"must be true or false like the default, got {raw!r}")
    if isinstance(default, int | float):
        kind = int if isinstance(default, int) else float
        word = "an integer" if kind is int else "a number"
        try:
            number = kind(raw)
        except ValueError:
            raise ValueError(f"must be {word} like the default {default!r}") from None
        if isinstance(number, float) and not math.isfinite(number):
            raise ValueError(f"must be a finite number like the default {default!r}")
        return number
    if isinstance(default, list | dict):
        shape = "a list like [a, b]" if isinstance(default, list) else "a mapping like {a: 1}"
        try:
            value, _ = load_yaml(raw, "--set")
        except ConfigError as exc:
            raise ValueError(f"must be {shape}: {exc.message}") from None
        if isinstance(value, type(default)):
            return value
        raise ValueError(f"must be {shape}")
    return raw
