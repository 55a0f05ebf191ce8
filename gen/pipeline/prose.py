"""`format: prose`: plain paragraphs, held token by token. A small model told "no headings
and no lists" writes them anyway (the outline again as a numbered list, a part's own
"## PREFACE"), which reads as the article starting over; held to this pattern it cannot.

A line may not start with whitespace or a Markdown block marker (`#`, `*`, `-`, `+`, `>`,
`|`, `=`, a backtick, `•`), nor with a list number (`1.`, `2)`); "1990s" and "1.5 m" are
fine. Paragraphs are separated by one blank line at most.
"""

from __future__ import annotations

_START = r"[^\s#*\-+>|=`•0-9]"  # what a line may start with, besides digits
_NUMBER = r"[0-9]+(?:[^\s.)0-9]|[.)][^\s.)])"  # digits, not a list number
LINE = rf"(?:{_START}|{_NUMBER}|[0-9]+\s)[^\n]*"
PROSE_REGEX = rf"{LINE}(?:\n\n?{LINE})*\n*"
