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
# what a claim is not made of: FUNCTION_WORDS and the other auxiliaries, quantifiers,
# connectives and pronouns a sentence keeps whatever its subject ("has", "which", "more")
STOPWORDS = FUNCTION_WORDS | {
    "am", "been", "being", "has", "have", "had", "having", "do", "does", "did", "will",
    "would", "can", "could", "may", "might", "must", "shall", "should", "not", "no", "nor",
    "which", "who", "whom", "whose", "what", "where", "why", "how", "than", "too", "very",
    "just", "only", "own", "same", "such", "each", "every", "all", "any", "both", "some",
    "other", "more", "most", "into", "onto", "about", "over", "under", "after", "before",
    "between", "through", "during", "while", "because", "until", "up", "down", "out", "off",
    "again", "once", "per", "via", "within", "without", "among", "them", "him", "me", "us",
    "itself", "themselves", "one", "s", "t", "thus", "therefore", "whereas", "yet", "since",
    "upon", "across", "around", "along", "against", "like", "many", "much", "several",
}  # fmt: skip
CJK_FUNCTION = frozenset("的了是在和有我你他她它们这那也就都而与及之其")
