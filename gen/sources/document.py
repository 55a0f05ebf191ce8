"""A source document as gen keeps it: text blocks, each with its place in the file (page,
heading path, line or row range). What a reader makes of the bytes; nothing about retrieval."""

from __future__ import annotations

from dataclasses import dataclass, field

# file extension (lower case) -> kind; a kind names its reader in gen.sources.formats
KINDS = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
    ".docx": "docx",
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
}
# the unit a span counts, and its name in a label (singular, plural)
UNITS = {"line": ("line", "lines"), "row": ("row", "rows")}


@dataclass(frozen=True, slots=True)
class Location:
    """Where a block or passage lies: a page (PDF), a heading path, and a span of lines
    (Markdown, text, JSON Lines) or spreadsheet rows (CSV, the header being row 1)."""

    page: int | None = None
    heading: tuple[str, ...] = ()
    unit: str | None = None  # "line" or "row"; None: no span
    first: int = 0
    last: int = 0

    def label(self) -> str:
        """`page 3`, `"Pricing > Tiers", lines 12-18`, `row 4`; empty when nothing is known."""
        parts = []
        if self.page is not None:
            parts.append(f"page {self.page}")
        if self.heading:
            parts.append('"' + " > ".join(self.heading) + '"')
        if self.unit is not None:
            one, many = UNITS[self.unit]
            span = (
                f"{one} {self.first}"
                if self.first == self.last
                else f"{many} {self.first}-{self.last}"
            )
            parts.append(span)
        return ", ".join(parts)

    def place(self) -> tuple[int | None, tuple[str, ...], str | None]:
        """What two neighbours must share to be one passage: page, heading path and unit."""
        return (self.page, self.heading, self.unit)


@dataclass(frozen=True, slots=True)
class Block:
    """A stretch of text from one place. For a span, line k of the text is unit first + k."""

    text: str
    location: Location = field(default_factory=Location)


@dataclass(frozen=True, slots=True)
class Document:
    path: str  # relative to the pipeline's folder, with / between parts
    kind: str  # a value of KINDS
    sha256: str  # of the file's bytes
    blocks: tuple[Block, ...]

    @property
    def chars(self) -> int:
        return sum(len(b.text) for b in self.blocks)


class Unreadable(Exception):
    """A reader's complaint about the bytes it was given; gen.sources.extract adds the file name
    and raises it as a SourceError. `line` is the file's line the complaint is about."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
