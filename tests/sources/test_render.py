from __future__ import annotations

from gen.sources.document import Location
from gen.sources.passages import Passage
from gen.sources.render import render, source


def passage(path: str, location: Location, text: str) -> Passage:
    return Passage(f"{path}#1", path, location, text, "0" * 64, 0)


def test_numbered_from_one_with_file_and_place() -> None:
    a = passage("handbook.md", Location(None, ("Pricing", "Tiers"), "line", 12, 18), "Basic: €9.")
    b = passage("review.pdf", Location(page=3), "营收八千四百万。")
    c = passage("notes.html", Location(), "No place known.")
    assert render([a, b, c]) == (
        '[1] (handbook.md, "Pricing > Tiers", lines 12-18)\nBasic: €9.\n\n'
        "[2] (review.pdf, page 3)\n营收八千四百万。\n\n"
        "[3] (notes.html)\nNo place known."
    )


def test_one_row_and_no_passages() -> None:
    assert source(passage("f.csv", Location(unit="row", first=4, last=4), "x")) == "(f.csv, row 4)"
    assert render([]) == ""
