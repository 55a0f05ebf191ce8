"""The files a pipeline and its sections take passages from (`sources:`): their templates
rendered with the inputs, resolved inside the pipeline's folder and read once when the
pipeline is loaded (gen.sources), so a missing, escaping or unreadable file stops the run
before the model loads. A section's own list replaces the pipeline's, `{add: [...]}` adds
to it, `none` shows it no passages."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gen.errors import SourceError
from gen.pipeline.spec import Pipeline, Section, SourcesAdd
from gen.pipeline.yaml_loader import SourceMap, YamlPath
from gen.sources import Document, Passage, passages, read_all, resolve

Named = list[tuple[YamlPath, str]]  # (where in the YAML, the template of a file, folder or glob)


@dataclass(slots=True)
class Library:
    """Every document the pipeline's sources name, read, and which files each section's
    list resolved to."""

    documents: list[Document] = field(default_factory=list)
    files: dict[str, list[str]] = field(default_factory=dict)  # section id -> document paths
    _passages: dict[str, list[Passage]] = field(default_factory=dict)  # path -> its passages

    def _split(self) -> dict[str, list[Passage]]:
        """Every document's passages by its path, split once."""
        if not self._passages:
            for document in self.documents:
                self._passages[document.path] = passages([document])
        return self._passages

    def passages_for(self, section_id: str) -> list[Passage]:
        """The passages of the files the section's list names, in the list's order."""
        split = self._split()
        return [p for path in self.files.get(section_id, []) for p in split[path]]

    def to_json(self) -> list[dict[str, object]]:
        """The manifest's `sources`: each file's path, kind, hash and passage count."""
        split = self._split()
        return [
            {
                "path": d.path,
                "kind": d.kind,
                "sha256": d.sha256,
                "passages": len(split[d.path]),
            }
            for d in self.documents
        ]


def pipeline_named(pipeline: Pipeline) -> Named:
    return [(("sources", i), spec) for i, spec in enumerate(pipeline.sources)]


def section_named(pipeline: Pipeline, index: int) -> Named:
    """What section `index` takes its passages from: the pipeline's list, its own, both."""
    own = pipeline.sections[index].sources
    where: YamlPath = ("sections", index, "sources")
    if own is None:
        return pipeline_named(pipeline)
    if own == "none":
        return []
    if isinstance(own, SourcesAdd):
        added = [((*where, "add", i), spec) for i, spec in enumerate(own.add)]
        return [*pipeline_named(pipeline), *added]
    return [((*where, i), spec) for i, spec in enumerate(own)]


def has_sources(pipeline: Pipeline, section: Section) -> bool:
    index = pipeline.sections.index(section)
    return bool(section_named(pipeline, index))


def all_named(pipeline: Pipeline) -> Named:
    named = pipeline_named(pipeline)
    for index, section in enumerate(pipeline.sections):
        if isinstance(section.sources, list):
            named += section_named(pipeline, index)
        elif isinstance(section.sources, SourcesAdd):
            named += section_named(pipeline, index)[len(pipeline.sources) :]
    return named


def load_library(pipeline: Pipeline, smap: SourceMap, base: Path) -> Library:
    """Render, resolve and read every source the pipeline names. A file that is missing, of
    a kind gen does not read or outside the pipeline's folder is an error at its place in
    the YAML; one that cannot be read is `FILE: message`."""
    library = Library()
    if not all_named(pipeline):
        return library
    templates = pipeline._templates
    resolved: dict[YamlPath, list[str]] = {}
    sources: dict[str, object] = {}
    for where, _ in all_named(pipeline):
        spec = templates.render(where, dict(pipeline.inputs, inputs=pipeline.inputs))
        try:
            found = resolve([spec], base)
        except SourceError as exc:
            raise smap.error(where, str(exc)) from None
        resolved[where] = [s.name for s in found.sources]
        for source in found.sources:
            sources.setdefault(source.name, source)
    library.documents = read_all(list(sources.values()))  # type: ignore[arg-type]
    for index, section in enumerate(pipeline.sections):
        names: list[str] = []
        for where, _ in section_named(pipeline, index):
            names += [n for n in resolved[where] if n not in names]
        library.files[section.id] = names
    return library


# words of a writing instruction, not of its subject: left out of a section's query, where
# they would match every passage that happens to say "report" or "one"
INSTRUCTION_WORDS = re.compile(
    r"\b(?:write|writing|paragraphs?|sentences?|sections?|reports?|articles?|documents?|essay|"
    r"words?|about|describe|explain|summari[sz]e|one|two|three|short|brief)\b",
    re.IGNORECASE,
)


def section_query(parts: Sequence[object]) -> str:
    """What a section's passages are ranked against: its title, its prompt and its item, as
    one text, the words of the instruction itself left out."""
    return INSTRUCTION_WORDS.sub(" ", "\n".join(str(p) for p in parts if p))
