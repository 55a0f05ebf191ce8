from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from gen.sources.document import Location, Unreadable
from gen.sources.formats.pdf import blocks

MakePdf = Callable[[str, Sequence[str]], Path]


def test_one_block_per_page_with_its_number(make_pdf: MakePdf) -> None:
    pages = [
        "<h1>Finances</h1><p>Revenue was EUR 84.2 million in 2025.</p>",
        "",  # a page with no text: no block, and the next page keeps its number
        "<p>The first Lindqvist T9 entered service on 2 September 2025.</p>",
        "<p>中文的第三页。</p>",
    ]
    got = blocks(make_pdf("review.pdf", pages).read_bytes())
    assert [b.location for b in got] == [Location(page=1), Location(page=3), Location(page=4)]
    assert got[0].text == "Finances\nRevenue was EUR 84.2 million in 2025."
    assert "2 September 2025" in got[1].text
    assert got[1].location.label() == "page 3"


def test_lines_of_a_paragraph_are_joined(make_pdf: MakePdf) -> None:
    words = " ".join(f"word{i}" for i in range(300))
    path = make_pdf("long.pdf", [f"<h2>Title</h2><p>{words}.</p><p>Next.</p>"])
    (block,) = blocks(path.read_bytes())
    assert block.text.startswith(f"Title\n{words}.")  # a short line or the page's end: "Next."


def test_a_pdf_without_text_says_so(make_pdf: MakePdf) -> None:
    path = make_pdf("blank.pdf", ["<div style='height: 5cm; background: black'></div>"])
    with pytest.raises(Unreadable, match=r"no text in it \(a scanned PDF needs OCR first\)"):
        blocks(path.read_bytes())


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"PK\x03\x04 a zip file", "not a PDF (no %PDF header)"),
        (b"%PDF-1.4\n%garbage that is no PDF\n", "cannot read PDF: "),
    ],
)
def test_what_is_not_a_pdf_is_unreadable(data: bytes, message: str) -> None:
    with pytest.raises(Unreadable) as raised:
        blocks(data)
    assert raised.value.message.startswith(message)
    assert "\n" not in raised.value.message
