from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from gen.sources.document import Unreadable
from gen.sources.formats.docx import blocks

MakeDocx = Callable[[str, Sequence[tuple[str, str | list[list[str]]]]], Path]


def test_paragraphs_under_their_headings_and_tables_as_rows(make_docx: MakeDocx) -> None:
    path = make_docx(
        "workforce.docx",
        [
            ("Normal", "Before any heading."),
            ("Title", "Workforce 2025"),
            ("Heading 1", "Staff"),
            ("Normal", "KRT employed 1,140 people."),
            ("Normal", "   "),
            ("Heading 2", "Drivers"),
            ("Table", [["Group", "2025"], ["Drivers", "612"]]),
            ("Heading 1", "Absence"),
            ("Normal", "病假率为 5.2%。"),
        ],
    )
    got = [(b.text, b.location.heading) for b in blocks(path.read_bytes())]
    assert got == [
        ("Before any heading.", ()),
        ("KRT employed 1,140 people.", ("Workforce 2025", "Staff")),
        ("Group | 2025", ("Workforce 2025", "Staff", "Drivers")),
        ("Drivers | 612", ("Workforce 2025", "Staff", "Drivers")),
        ("病假率为 5.2%。", ("Workforce 2025", "Absence")),
    ]


def test_what_is_not_a_word_document_is_unreadable() -> None:
    with pytest.raises(Unreadable, match=r"^cannot read DOCX: "):
        blocks(b"PK\x03\x04 not really a zip")
    with pytest.raises(Unreadable, match=r"^cannot read DOCX: "):
        blocks(b"plain text")
