from __future__ import annotations

import re
import time

import pytest

from gen.errors import ConfigError
from gen.pipeline.yaml_loader import MAX_VALUES, Span, format_path, load_yaml

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


# -- what YAML refuses, and what would never finish -------------------------------------


def nested_aliases(levels: int, width: int, merge: bool = False) -> str:
    """`levels` anchors, each holding `width` aliases of the one before (or merging it)."""
    lines = ["l0: &l0 {k: v}" if merge else "l0: &l0 [v]"]
    for i in range(1, levels + 1):
        refs = ", ".join([f"*l{i - 1}"] * width)
        lines.append(f"l{i}: &l{i} " + (f"{{<<: [{refs}]}}" if merge else f"[{refs}]"))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("merge", [False, True], ids=["aliases", "merges"])
def test_an_alias_bomb_fails_fast_at_the_value_that_crosses_the_limit(merge: bool) -> None:
    start = time.monotonic()
    with pytest.raises(ConfigError, match="past 100,000 values") as info:
        load_yaml(nested_aliases(9, 9, merge), "bomb.yaml")  # 9**9 values if expanded
    assert time.monotonic() - start < 5
    # l5 holds 9**5 = 59,049 copies of l0 (and l4 only 6,561): the first to cross the limit
    assert (info.value.line, info.value.col) == (6, 5)
    assert info.value.snippet is not None and "6 | l5: &l5" in info.value.snippet


def test_aliases_below_the_limit_still_expand() -> None:
    data, _ = load_yaml(nested_aliases(4, 9), "x.yaml")
    assert len(data["l4"]) == 9 and data["l4"][0][0][0][0] == ["v"]
    assert MAX_VALUES == 100_000


@pytest.mark.parametrize(
    "text", ["a: &a [1, *a]\n", "a: &a {x: 1, <<: *a}\n"], ids=["alias", "merge"]
)
def test_recursive_aliases_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="recursive YAML alias") as info:
        load_yaml(text, "x.yaml")
    assert (info.value.line, info.value.col) == (1, 4)


@pytest.mark.parametrize(
    ("text", "code", "col"),
    [("a: x\x00y\n", "U+0000", 5), ("t: 长城\x1b[0m\n", "U+001B", 6), ("k: a\x9b\n", "U+009B", 5)],
    ids=["nul", "esc-after-cjk", "c1"],
)
def test_control_characters_are_located(text: str, code: str, col: int) -> None:
    expected = re.escape(f"control character {code} is not allowed")
    with pytest.raises(ConfigError, match=expected) as info:
        load_yaml("name: x\n" + text, "x.yaml")
    assert (info.value.file, info.value.line, info.value.col) == ("x.yaml", 2, col)
