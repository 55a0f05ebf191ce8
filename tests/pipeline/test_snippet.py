"""Snippets under located errors: long lines clipped around the column, carets under CJK
and emoji counted in terminal cells, control characters shown as pictures, and UTF-8
errors located by line and column."""

from __future__ import annotations

import time

import pytest

from gen.errors import ConfigError, TemplateError
from gen.pipeline import load_pipeline_text
from gen.pipeline.snippet import CONTEXT, decode_source, position, snippet


def test_a_short_line_is_shown_whole() -> None:
    assert snippet(["name: demo"], 1, 7, 4) == "  |\n1 | name: demo\n  |       ^^^^"


def test_carets_under_wide_characters_count_terminal_cells() -> None:
    # 主题 and 🍵 take two cells each: the caret must sit under 长城, four carets wide
    text = "  主题🍵: 长城"
    lines = snippet([text], 1, 8, 2).splitlines()
    assert lines[1] == "1 |   主题🍵: 长城"
    assert lines[2] == "  | " + " " * (2 + 4 + 2 + 2) + "^^^^"


def test_tabs_are_kept_so_the_caret_lines_up() -> None:
    assert snippet(["\tkey: x"], 1, 7).splitlines()[2] == "  | \t     ^"


def test_control_characters_are_shown_as_pictures() -> None:
    lines = snippet(["a\x1b[31mb\x00c"], 1, 2).splitlines()
    assert lines[1] == "1 | a␛[31mb␀c"
    assert "\x1b" not in "".join(lines) and lines[2] == "  |  ^"


def test_a_long_line_is_clipped_around_the_column() -> None:
    text = "前" * 3_000_000 + "{{ nope }}" + "后" * 2_000_000  # a 15 MB line in UTF-8
    col = 3_000_000 + 4
    lines = snippet([text], 1, col, 4).splitlines()
    assert len("\n".join(lines)) < 6 * CONTEXT
    assert lines[1] == "1 | …" + "前" * (CONTEXT - 3) + "{{ nope }}" + "后" * (CONTEXT - 3) + "…"
    # the caret sits under `nope`: the ellipsis takes one cell, each 前 two
    assert lines[2] == "  | " + " " * (1 + 2 * (CONTEXT - 3) + 3) + "^^^^"


def test_a_wide_mark_on_a_long_line_is_clipped_too() -> None:
    lines = snippet(["x" * 10_000], 1, 1, 10_000).splitlines()
    assert lines[1] == "1 | " + "x" * (2 * CONTEXT) + "…"
    assert lines[2] == "  | " + "^" * CONTEXT


def test_a_5_mb_prompt_that_fails_prints_a_short_error() -> None:
    prompt = "写" * 2_500_000 + " {{ nope }} " + "🍵" * 1_000_000
    text = f'sections:\n  - id: intro\n    prompt: "{prompt}"\n'
    start = time.monotonic()
    with pytest.raises(TemplateError, match="'nope'") as info:
        load_pipeline_text(text, file="big.yaml")
    shown = str(info.value)
    assert len(shown) < 1_000
    col = len('    prompt: "') + 2_500_000 + 5  # the `n` of nope
    assert shown.startswith(f"big.yaml:3:{col}: ")
    assert "…" in shown and "nope" in shown.splitlines()[2]
    assert time.monotonic() - start < 30


def test_position_counts_characters_not_bytes() -> None:
    text = "一\n二三\r\n四"
    assert position(text, 0) == (1, 1)
    assert position(text, text.index("三")) == (2, 2)
    assert position(text, text.index("四")) == (3, 1)


def test_invalid_utf8_is_located_by_line_and_column() -> None:
    data = "line one\n主题：".encode() + b"\xff rest\n"
    with pytest.raises(ConfigError, match=r"invalid UTF-8 \(byte 0xff\)") as info:
        decode_source(data, "x.yaml", ConfigError)
    err = info.value
    assert (err.file, err.line, err.col) == ("x.yaml", 2, 4)
    assert err.snippet is not None and "2 | 主题：� rest" in err.snippet
    assert decode_source("好".encode(), "x.yaml", ConfigError) == "好"
