"""`--set KEY=VALUE` and batch records: override declared inputs, typed like their defaults."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from gen.pipeline.suggest import did_you_mean
from gen.pipeline.yaml_loader import SourceMap

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
            raise smap.error(("inputs",), f"--set {key}: unknown input{tip}", at="key")
        try:
            out[key] = coerce(raw, inputs[key])
        except ValueError as exc:
            raise smap.error(("inputs", key), f"--set {key}={raw}: {exc}", at="key") from None
    return out


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
        try:
            return kind(raw)
        except ValueError:
            word = "an integer" if kind is int else "a number"
            raise ValueError(f"must be {word} like the default {default!r}") from None
    if isinstance(default, list | dict):
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            value = None
        if isinstance(value, type(default)):
            return value
        shape = "a list like [a, b]" if isinstance(default, list) else "a mapping like {a: 1}"
        raise ValueError(f"must be {shape}")
    return raw
