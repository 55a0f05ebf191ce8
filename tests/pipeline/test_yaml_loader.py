from __future__ import annotations

import pytest

from gen.errors import ConfigError
from gen.pipeline.yaml_loader import Span, format_path, load_yaml

TEXT = """\
name: demo
sections:
  - id: intro
    max_tokens: 10
  - id: body
    prompt: |
      line one
      line two
"""


def test_positions_of_keys_values_and_items() -> None:
    data, smap = load_yaml(TEXT, "p.yaml")
    assert data["sections"][0]["max_tokens"] == 10
    assert smap.keys[("sections", 0, "max_tokens")] == Span(4, 5, 4, 15)
    value = smap.values[("sections", 0, "max_tokens")]
    assert (value.line, value.col, value.width) == (4, 17, 2)
    assert (smap.values[("sections", 1)].line, smap.values[("sections", 1)].col) == (5, 5)
    assert smap.values[("sections", 1, "prompt")].style == "|"


def test_value_span_falls_back_to_nearest_ancestor() -> None:
    _, smap = load_yaml(TEXT, "p.yaml")
    span = smap.value_span(("sections", 0, "missing", 3))
    assert (span.line, span.col) == (3, 5)


def test_error_has_snippet_with_caret() -> None:
    _, smap = load_yaml(TEXT, "p.yaml")
    err = smap.error(("sections", 0, "max_tokens"), "bad value")
    assert (err.file, err.line, err.col) == ("p.yaml", 4, 17)
    assert str(err) == (
        "p.yaml:4:17: bad value\n  |\n4 |     max_tokens: 10\n  |                 ^^"
    )


def test_format_path() -> None:
    assert format_path(("sections", 2, "max_tokens")) == "sections[2].max_tokens"
    assert format_path(("defaults", "stop", 0)) == "defaults.stop[0]"
    assert format_path(()) == ""


def test_duplicate_keys_are_rejected() -> None:
    with pytest.raises(ConfigError, match="duplicate key 'a'") as info:
        load_yaml("a: 1\nb: 2\na: 3\n", "x.yaml")
    assert (info.value.line, info.value.col) == (3, 1)


def test_merge_keys_and_aliases_work() -> None:
    data, smap = load_yaml("base: &b {x: 1}\nmore:\n  <<: *b\n  y: 2\n", "x.yaml")
    assert data["more"] == {"x": 1, "y": 2}
    assert smap.values[("more", "y")].line == 4


def test_syntax_errors_are_located() -> None:
    with pytest.raises(ConfigError, match="YAML syntax error") as info:
        load_yaml("a: [1, 2\nb: 3\n", "x.yaml")
    assert info.value.file == "x.yaml" and info.value.line is not None


def test_unknown_tags_are_rejected() -> None:
    with pytest.raises(ConfigError, match="tag"):
        load_yaml("a: !python/object:os.system x\n", "x.yaml")


def test_multiple_documents_are_rejected() -> None:
    with pytest.raises(ConfigError, match="single document"):
        load_yaml("a: 1\n---\nb: 2\n", "x.yaml")


def test_empty_document_is_none() -> None:
    data, _ = load_yaml("# nothing\n", "x.yaml")
    assert data is None
