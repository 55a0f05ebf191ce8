"""`gen run --stream`: the document written to stdout while it is generated, from the run's
events. Knows how the default document template lays out parts; renders nothing itself."""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, Any

from gen.pipeline.spec import Pipeline, Section
from gen.pipeline.templates.render import document_title


class DocumentStream:
    """Writes each part once it is the next one in document order; text of parts running
    alongside is held until their turn.

    With the default document template (render.DEFAULT_DOCUMENT) the output is the document
    itself, byte for byte: the title, a heading per part, the parts in file order with each
    fan-out expanded, hidden sections left out, each part's text trimmed. A custom template
    may lay the text out in any way, so then only the parts' text is written, a blank line
    between parts (`assembled` is False)."""

    def __init__(
        self, pipeline: Pipeline, read_section: Callable[[str], str | None], out: IO[str]
    ) -> None:
        """`read_section(key)`: a finished section's text on disk (a resumed run's cached
        sections send no deltas)."""
        self.pipeline = pipeline
        self.read_section = read_section
        self.out = out
        document = pipeline.document
        self.assembled = document.template is None and document.inline is None
        self.parts = [s for s in pipeline.sections if s.in_document]
        self.titles: dict[str, str] = {}  # key -> title, once the part has started
        self.texts: dict[str, str] = {}
        self.items: dict[str, list[str]] = {}  # key -> parsed items, once it has finished
        self.head = 0  # the part being written: self.parts[head], instance `instance`
        self.instance = 0
        self.shown = 0  # characters of the head instance's trimmed text written
        self.opened = False  # the head instance's heading is written
        self.written_parts = 0

    def __call__(self, ev: dict[str, Any]) -> None:
        t = ev["type"]
        if t == "run_started" and self.assembled:
            self.out.write(f"# {document_title(self.pipeline)}\n")
        elif t == "section_started":
            key = ev["section"]
            self.titles[key] = ev.get("title", "")
            self.texts[key] = (self.read_section(key) or "") if ev.get("cached") else ""
        elif t == "delta":
            self.texts[ev["section"]] += ev["text"]
        elif t == "section_finished":
            self.items[ev["section"]] = list(ev.get("items", []))
        self._drain()
        self.out.flush()

    def _drain(self) -> None:
        while self.head < len(self.parts):
            keys = self._keys(self.parts[self.head])
            if keys is None:
                return  # how many instances this fan-out has is not known yet
            while self.instance < len(keys):
                if not self._write(keys[self.instance]):
                    return
                self.instance += 1
                self.shown, self.opened = 0, False
            self.head += 1
            self.instance = 0

    def _write(self, key: str) -> bool:
        """Write what there is of part `key`; True once it is written to its end."""
        if key not in self.titles:
            return False
        if not self.opened:
            self.out.write(self._opening(key))
            self.opened = True
        # the template trims each part: leading whitespace never shows, trailing waits for
        # text after it (the strip of what has come is a prefix of the final strip)
        text = self.texts[key].strip()
        self.out.write(text[self.shown :])
        self.shown = len(text)
        if key not in self.items:
            return False  # not finished yet
        self.out.write("\n")
        self.written_parts += 1
        return True

    def _opening(self, key: str) -> str:
        if self.assembled:
            return f"\n## {self.titles[key]}\n\n"
        return "\n" if self.written_parts else ""

    def _keys(self, section: Section) -> list[str] | None:
        """The keys of a section's instances in document order; None while a fan-out's item
        count is unknown."""
        target = section.foreach_target()
        if target is None:
            return [section.id]
        count = self._count(*target)
        return None if count is None else [f"{section.id}-{i}" for i in range(1, count + 1)]

    def _count(self, kind: str, name: str) -> int | None:
        """How many items a fan-out runs over, as variables.foreach_items gets them: an
        input list, or every item a `parse: list` section (all its instances) produced."""
        if kind == "inputs":
            return len(self.pipeline.inputs[name])
        keys = self._keys(self.pipeline.section(name))
        if keys is None or any(k not in self.items for k in keys):
            return None
        return sum(len(self.items[k]) for k in keys)
