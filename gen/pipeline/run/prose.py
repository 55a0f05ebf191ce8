"""`format: prose`: plain paragraphs, held token by token. A small model told "no headings
and no lists" writes them anyway (the outline again as a numbered list, a part's own
"## PREFACE"), which reads as the article starting over; held to this pattern it cannot.

A line starts with a letter (of any script) or an opening quote or bracket, so not with
whitespace, a Markdown block marker (`#`, `*`, `-`, `>`, `|`, a backtick, `•`) or a
symbol, nor with a list or section number (`1.`, `2)`, `1.The`, `1-1.`, `1 The`,
`1.2.1 History`); a number may start a line as prose does ("1990s", "1990 was", "2021,
the year", "2021年"), a decimal only inside a line. No line holds markup symbols
(`< > = # * | { } \\ ^ _` or a backtick): a model that began "<<Introduction" went on in
"<<<<====" for rounds, which no word count sees. A line ends as a sentence does (`.`, `!`,
`?`, `…`, `。`, `！`, `？`, then closing quotes or brackets), so a title, a label
("Summary:") or a one-word line ("Lighthouse", again and again) cannot be written, and the
text can only end there. Paragraphs are separated by one blank line at most.
"""

from __future__ import annotations

# what a line may start with, besides digits: a letter, an opening quote or bracket
_START = r"[^\W\d_]|[\"'“‘(\[「『《（¿¡]"
# a number as prose starts a line ("1990s", "1990 was", "2021, the", "2021年"), a list's or
# a heading's does not ("1.", "1)", "1-1.", "1 The", "1.2.1 History"): at most four digits,
# then "s", a lower-case word or a non-ASCII letter. (Allowing "1.5" let a model that began
# "1." go on in digits for ever; allowing "-" let it write "1-1. The history".)
_NUMBER = r"[0-9]{1,4}(?:s|,? [a-z]|[^\x00-\x7f、．。）•])"  # (not "1、", the Chinese list's)
# how a line ends: a sentence's end, its closing quotes or brackets, trailing blanks
_END = r"[.!?…。！？][\"'”’)\]」』》）]*[ \t]*"
_BODY = r"[^\n<>=#*|`{}\\^_]"  # what a line holds: anything but markup symbols
LINE = rf"(?:{_START}|{_NUMBER}){_BODY}*{_END}"
PROSE_REGEX = rf"{LINE}(?:\n\n?{LINE})*\n*"
