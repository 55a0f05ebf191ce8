from __future__ import annotations

import pytest

from gen.sources.document import Location, Unreadable
from gen.sources.formats.decode import decode
from gen.sources.formats.plaintext import blocks


def test_paragraphs_with_their_line_ranges() -> None:
    data = "\n\nFirst paragraph\nstill first.\n   \nSecond 段落。\n\n\nThird.".encode()
    got = [(b.text, b.location) for b in blocks(data)]
    assert got == [
        ("First paragraph\nstill first.", Location(None, (), "line", 3, 4)),
        ("Second 段落。", Location(None, (), "line", 6, 6)),
        ("Third.", Location(None, (), "line", 9, 9)),
    ]


def test_an_empty_file_has_no_blocks() -> None:
    assert blocks(b"") == [] and blocks(b"\n \n") == []


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"text\x00more", "binary content (it holds NUL bytes), not text"),
        (
            "naïve café".encode("latin-1"),
            "not UTF-8 text (2 bytes are not UTF-8); save it as UTF-8",
        ),
    ],
)
def test_what_is_not_text_is_unreadable(data: bytes, message: str) -> None:
    with pytest.raises(Unreadable) as raised:
        decode(data)
    assert raised.value.message == message


def test_a_replacement_character_in_the_file_is_not_counted_as_bad() -> None:
    text = "\ufffd" * 10 + " fine"
    assert decode(text.encode()) == text
