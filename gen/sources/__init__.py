"""The user's own documents (DESIGN §12): which files a pipeline names (paths), their text
as located blocks (read, formats), passages that keep their place (passages), and the ones
a section is shown (retrieve, render). Torch-free; knows nothing of pipelines or prompts."""

from gen.sources.document import Block, Document, Location
from gen.sources.extract import load, read, read_all
from gen.sources.limits import MAX_CHARS, MAX_FILE_BYTES, MAX_FILES, PASSAGE_WORDS
from gen.sources.passages import Passage, passages, split
from gen.sources.paths import Found, Source, resolve
from gen.sources.render import render
from gen.sources.retrieve import Scored, rank, select

__all__ = [
    "MAX_CHARS",
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "PASSAGE_WORDS",
    "Block",
    "Document",
    "Found",
    "Location",
    "Passage",
    "Scored",
    "Source",
    "load",
    "passages",
    "rank",
    "read",
    "read_all",
    "render",
    "resolve",
    "select",
    "split",
]
