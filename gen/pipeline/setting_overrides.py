"""`--set defaults.KEY=VALUE` and `--set sections.ID.KEY=VALUE` (the same keys in a batch
record): generation settings from outside the file, read as YAML and validated like it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from gen.errors import ConfigError
from gen.pipeline.inputs import shorten, unusable
from gen.pipeline.schema_errors import describe
from gen.pipeline.spec import GENERATION_FIELDS, Pipeline
from gen.pipeline.suggest import closest, did_you_mean
from gen.pipeline.templates.render import COUNT_FIELDS
from gen.pipeline.yaml_loader import load_yaml

SECTION_KEYS = (*GENERATION_FIELDS, *COUNT_FIELDS)
_SCOPES = ("defaults", "sections")
_FORMS = "settings are defaults.<key> or sections.<id>.<key>; input names have no dot"

M = TypeVar("M", bound=BaseModel)


def split_overrides(
    overrides: Mapping[str, object],
) -> tuple[dict[str, object], dict[str, object]]:
    """(inputs, settings): a key with a dot is a setting, since input names have none.
    Keys and values that no file or request could carry (see inputs.unusable) are refused."""
    inputs: dict[str, object] = {}
    settings: dict[str, object] = {}
    for key, value in overrides.items():
        problem = unusable(key)
        if problem is None:
            problem = unusable(value)
        if problem is not None:
            raise ConfigError(f"--set {shorten(key)}: {problem}")
        scope, dot, rest = key.partition(".")
        if not dot:
            inputs[key] = value
        elif scope in _SCOPES:
            settings[key] = value
        else:
            meant = closest(scope, _SCOPES)
            tip = f"did you mean {f'{meant}.{rest}'!r}? " if meant else ""
            raise ConfigError(f"--set {shorten(key)}: unknown setting; {tip}({_FORMS})")
    return inputs, settings


def apply_settings(pipeline: Pipeline, settings: Mapping[str, object]) -> None:
    """Lay each setting over the schema-checked pipeline; errors name the --set key."""
    for key, raw in settings.items():
        value = _parse(raw)
        parts = key.split(".")
        if parts[0] == "defaults" and len(parts) == 2:
            _known(key, parts[1], GENERATION_FIELDS)
            pipeline.defaults = _with(pipeline.defaults, parts[1], value, key)
        elif parts[0] == "sections" and len(parts) == 3:
            ids = [s.id for s in pipeline.sections]
            if parts[1] not in ids:
                tip = did_you_mean(parts[1], ids, f"; ids: {', '.join(ids)}")
                raise ConfigError(f"--set {key}: unknown section id {parts[1]!r}{tip}")
            _known(key, parts[2], SECTION_KEYS)
            index = ids.index(parts[1])
            pipeline.sections[index] = _with(pipeline.sections[index], parts[2], value, key)
        else:
            raise ConfigError(f"--set {key}: {_FORMS}")


def _known(key: str, name: str, allowed: Sequence[str]) -> None:
    if name not in allowed:
        tip = did_you_mean(name, allowed, f"; allowed: {', '.join(allowed)}")
        raise ConfigError(f"--set {key}: unknown key {name!r}{tip}")


def _with(model: M, name: str, value: object, key: str) -> M:
    """`model` with `name` set to `value`, validated as if the YAML had said so."""
    data = model.model_dump(exclude_unset=True)
    data[name] = value
    try:
        return type(model).model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"--set {key}: {describe(exc.errors(include_url=False)[0])}") from None


def _parse(raw: object) -> object:
    """A value from the command line as YAML (`5`, `0.7`, `null`, `[a, b]`); text YAML would
    read as a mapping, or cannot read, stays text (`system=Be brief: two lines`)."""
    if not isinstance(raw, str):
        return raw
    try:
        value, _ = load_yaml(raw, "--set")
    except ConfigError:
        return raw
    return raw if isinstance(value, dict) else value
