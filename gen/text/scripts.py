"""Which scripts space their words: below SPACED_SCRIPTS_END (Latin, Greek, Cyrillic,
Armenian) a word runs to the next space; in CJK or Thai a character or a syllable is a
word start as the loop checks and DRY see it. Torch-free, for the engine and the pipeline."""

from __future__ import annotations

SPACED_SCRIPTS_END = 0x0590


def spaced_letter(ch: str) -> bool:
    """A letter of a script that spaces its words; digits aside, since DRY treats a number
    said again as a loop's mark."""
    return ch.isalpha() and ord(ch) < SPACED_SCRIPTS_END


def spaced_script(text: str) -> bool:
    """Every character of text lies below SPACED_SCRIPTS_END (a letter, digit, space or
    mark of a script that spaces its words): no CJK, Thai or other character."""
    return all(ord(ch) < SPACED_SCRIPTS_END for ch in text)
