"""The limits on what a pipeline may read, stated once (docs/sources.md repeats them)."""

from __future__ import annotations

MAX_FILE_BYTES = 20 * 1024 * 1024  # one file; a larger one is refused from its size alone
MAX_FILES = 200  # files in all, after folders and globs are expanded
MAX_CHARS = 5_000_000  # characters of text extracted from all files together
PASSAGE_WORDS = 120  # a passage's target length, in words (a CJK character is one word)
