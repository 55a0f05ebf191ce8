"""described(): a value as an error message shows it, in YAML's words or JSON's."""

from __future__ import annotations

from typing import Any

import pytest

from gen.values import described


@pytest.mark.parametrize(
    ("value", "yaml", "json"),
    [
        ({"a": 1}, "a mapping", "an object"),
        ([1, 2], "a list", "an array"),
        (None, "nothing (null)", "null"),
        (True, "True", "true"),
        (False, "False", "false"),
        ("lots", "'lots'", "a string"),
        (3, "3", "a number"),
        (2.5, "2.5", "a number"),
        ("x" * 50, "'" + "x" * 36 + "...", "a string"),
    ],
)
def test_a_value_in_yaml_and_in_json(value: Any, yaml: str, json: str) -> None:
    assert described(value) == yaml
    assert described(value, json=True) == json
