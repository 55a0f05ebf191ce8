from __future__ import annotations

import pytest

from gen.sources.document import Location, Unreadable
from gen.sources.formats.csv import blocks


def test_each_row_is_a_block_at_its_spreadsheet_row() -> None:
    data = (
        "line,route,boardings\n1,Northgate - Southport,13.4\n\n"
        '3,"University,\nHospital",15.2\n4,,9.2,extra\n'
    )
    got = [(b.text, b.location) for b in blocks(data.encode())]
    assert got == [
        ("line: 1; route: Northgate - Southport; boardings: 13.4", Location(None, (), "row", 2, 2)),
        ("line: 3; route: University, Hospital; boardings: 15.2", Location(None, (), "row", 4, 4)),
        ("line: 4; boardings: 9.2; extra", Location(None, (), "row", 5, 5)),
    ]
    assert got[1][1].label() == "row 4"


def test_a_semicolon_file_and_a_header_without_a_name() -> None:
    (block,) = blocks("Stadt;;Fahrgäste\nKessling;x;48,7\n".encode())
    assert block.text == "Stadt: Kessling; column 2: x; Fahrgäste: 48,7"


def test_a_header_alone_has_no_blocks() -> None:
    assert blocks(b"a,b\n") == [] and blocks(b"") == []


def test_a_field_past_the_csv_limit_names_the_line() -> None:
    with pytest.raises(Unreadable) as raised:
        blocks(b"a\nshort\n" + b"x" * 200_000 + b"\n")
    assert raised.value.message.startswith("not valid CSV: field larger than field limit")
    assert raised.value.line == 3
