"""Plain text: paragraphs (runs of lines between blank lines), each with its line range."""

from __future__ import annotations

from gen.sources.document import Block, Location
from gen.sources.formats.decode import decode


def blocks(data: bytes) -> list[Block]:
    return paragraphs(decode(data).split("\n"))


def paragraphs(lines: list[str], first: int = 1, heading: tuple[str, ...] = ()) -> list[Block]:
    """One block per run of non-blank lines; `first` is the number of lines[0] in the file."""
    out: list[Block] = []
    start = None
    for i, line in enumerate([*lines, ""]):
        if line.strip() and start is None:
            start = i
        elif not line.strip() and start is not None:
            text = "\n".join(lines[start:i])
            location = Location(
                heading=heading, unit="line", first=first + start, last=first + i - 1
            )
            out.append(Block(text, location))
            start = None
    return out
