"""CSV: the first row names the columns; every later row is a block `column: value; ...`,
located by its spreadsheet row (the header is row 1, the first record row 2)."""

from __future__ import annotations

import csv
import io

from gen.sources.document import Block, Location, Unreadable
from gen.sources.formats.decode import decode


def blocks(data: bytes) -> list[Block]:
    text = decode(data)
    reader = csv.reader(io.StringIO(text, newline=""), _dialect(text))
    out: list[Block] = []
    try:
        header = next(reader, None)
        if header is None:
            return []
        names = [h.strip() or f"column {i}" for i, h in enumerate(header, start=1)]
        for number, row in enumerate(reader, start=2):
            cells = [" ".join(v.split()) for v in row]  # a cell's line ends too: one row, one line
            pairs = [f"{n}: {v}" for n, v in zip(names, cells, strict=False) if v]
            pairs += [v for v in cells[len(names) :] if v]  # cells past the header
            if pairs:
                out.append(Block("; ".join(pairs), Location(unit="row", first=number, last=number)))
    except csv.Error as exc:
        raise Unreadable(f"not valid CSV: {exc}", line=reader.line_num) from None
    return out


def _dialect(text: str) -> type[csv.Dialect] | csv.Dialect:
    """The file's own delimiter when it is one of , ; tab |; else a comma."""
    try:
        return csv.Sniffer().sniff(text[:4096], delimiters=",;\t|")
    except csv.Error:
        return csv.excel
