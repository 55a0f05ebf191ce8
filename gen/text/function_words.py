"""Function words: the words a check passes over when it asks what a sentence or title is
about (English determiners, pronouns, prepositions, auxiliaries; common CJK particles)."""

from __future__ import annotations

DETERMINERS = frozenset({"the", "a", "an", "this", "that", "these", "those"})
FUNCTION_WORDS = DETERMINERS | {
    "i", "you", "he", "she", "it", "we", "they", "its", "their", "his", "her", "our", "my",
    "your", "there", "here", "in", "on", "at", "to", "of", "for", "with", "by", "from", "as",
    "and", "but", "or", "so", "if", "when", "then", "also", "however", "is", "are", "was",
    "were", "be", "it's",
}  # fmt: skip
CJK_FUNCTION = frozenset("的了是在和有我你他她它们这那也就都而与及之其")
