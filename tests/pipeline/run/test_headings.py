"""The heading filter: a section's own headings demoted or stripped as text streams in,
the title repeated on the first line dropped, text split anywhere."""

from __future__ import annotations

import pytest

from gen.pipeline.run.headings import HeadingFilter
from gen.pipeline.spec import HeadingMode

TEXT = (
    "# The Printing Press\n"
    "Gutenberg's press changed Europe. 🖨️\n"
    "## PREFACE\n"
    "Some words.\n"
    "#### Deep heading\n"
    "中文段落。\n"
    "#hashtag is not a heading\n"
)


def stream(f: HeadingFilter, text: str, size: int) -> str:
    out = "".join(f.feed(text[i : i + size]) for i in range(0, len(text), size))
    return out + f.flush()


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (
            "demote",
            "Gutenberg's press changed Europe. 🖨️\n### PREFACE\nSome words.\n#### Deep heading\n"
            "中文段落。\n#hashtag is not a heading\n",
        ),
        (
            "strip",
            "Gutenberg's press changed Europe. 🖨️\nPREFACE\nSome words.\nDeep heading\n"
            "中文段落。\n#hashtag is not a heading\n",
        ),
        ("keep", TEXT.split("\n", 1)[1]),
    ],
)
def test_modes_and_the_repeated_title(mode: HeadingMode, expected: str, size: int) -> None:
    assert stream(HeadingFilter(mode, "The printing press"), TEXT, size) == expected


def test_a_first_line_that_is_not_the_title_is_kept() -> None:
    f = HeadingFilter("demote", "Something else")
    assert stream(f, TEXT, 5).startswith("### The Printing Press\nGutenberg")


def test_bold_title_line_is_dropped_and_prose_passes_at_once() -> None:
    f = HeadingFilter("demote", "長城の歴史")
    assert f.feed("**長城の歴史:**\n") == ""
    assert f.feed("The wall ") == "The wall "  # not a line start any more: no holding
    assert f.feed("is long.") == "is long."
    assert f.flush() == ""


@pytest.mark.parametrize("size", [1, 2, 5, 1000])
def test_blank_lines_after_a_dropped_title_are_dropped_too(size: int) -> None:
    # seen in the long-article recipe: "Title\n\nText" left the part starting with "\n",
    # which its prose grammar then refused as the text already written
    f = HeadingFilter("demote", "ประวัติประภาคาร 灯塔")
    text = "ประวัติประภาคาร 灯塔\n\n\nแสงไฟ 🗼 guides ships.\n\nA second paragraph.\n"
    assert stream(f, text, size) == "แสงไฟ 🗼 guides ships.\n\nA second paragraph.\n"


def test_keep_without_title_passes_everything_through() -> None:
    f = HeadingFilter("keep")
    assert f.feed("# A\n") == "# A\n"
