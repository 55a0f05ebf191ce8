"""`format: prose`: plain paragraphs, held token by token. A small model told "no headings
and no lists" writes them anyway (the outline again as a numbered list, a part's own
"## PREFACE"), which reads as the article starting over; held to this pattern it cannot.

A line may not start with whitespace or a Markdown block marker (`#`, `*`, `-`, `+`, `>`,
`|`, `=`, a backtick, `•`), nor with a list or section number (`1.`, `2)`, `1.The`,
`1-1.`, `1 The`, `1.2.1 History`); a number may start a line as prose does ("1990s",
"1990 was", "2021, the year", "2021年"), a decimal only inside a line. Paragraphs are
separated by one blank line at most.
"""

from __future__ import annotations

_START = r"[^\s#*\-+>|=`•0-9]"  # what a line may start with, besides digits
# a number as prose starts a line ("1990s", "1990 was", "2021, the", "2021年"), a list's or
# a heading's does not ("1.", "1)", "1-1.", "1 The", "1.2.1 History"): at most four digits,
# then "s", a lower-case word or a non-ASCII letter. (Allowing "1.5" let a model that began
# "1." go on in digits for ever; allowing "-" let it write "1-1. The history".)
_NUMBER = r"[0-9]{1,4}(?:s|,? [a-z]|[^\x00-\x7f、．。）•])"  # (not "1、", the Chinese list's)
LINE = rf"(?:{_START}|{_NUMBER})[^\n]*"
PROSE_REGEX = rf"{LINE}(?:\n\n?{LINE})*\n*"
