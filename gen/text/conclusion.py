"""Conclusions and shouting: whether a paragraph opens as a text's conclusion ("In
conclusion, …", "总之，…", a "## Conclusion" heading), and whether it is written in capitals
throughout. English and Chinese. Pure text, torch-free."""

from __future__ import annotations

import re

# what opens a conclusion: a phrase that sums up, at the paragraph's start ("Overall" and
# the like with their comma: "Overall revenue rose" is a finding; "最后，" opens a last
# point and "In the end" a story's last turn: neither is one)
_SUMS_UP = re.compile(
    r"(?:in conclusion|in summary|to sum up|to summari[sz]e|all in all|in closing)\b"
    r"|(?:to conclude|in short|in sum|overall|ultimately)\s*[,，]"
    r"|总之|综上|总而言之|总的来说|总体来说|总结来说",
    re.IGNORECASE,
)
# a heading that names the conclusion, alone or first ("## Conclusion", "### 五、结论",
# "**结语**", "## Conclusions and Recommendations"; a "Summary" heading opens a report's
# summary at its start, not its end)
_HEADING = re.compile(
    r"(?:(?:\d+(?:\.\d+)*|[一二三四五六七八九十]+)[.、．]?\s*)?"
    r"(?:conclusions?|concluding remarks|closing thoughts|final thoughts|in conclusion|"
    r"结论|结语|总结|结束语|小结)(?:\s*(?:and|&|与|和|及)\s*[^.!?。！？]*)?[\s:：]*",
    re.IGNORECASE,
)
# a label in bold that names the conclusion, opening a paragraph's text
_LABEL = re.compile(
    r"\s*(?:\*\*|__)\s*(?:conclusions?|in conclusion|结论|结语|总结)\s*[:：]?\s*(?:\*\*|__)",
    re.IGNORECASE,
)
# markers in a line: heading hashes, a quote's ">" and list markers before its words,
# emphasis anywhere ("**Overall**, …")
_MARKERS = re.compile(r"^[\s>#\-+•]*|[*_`~]+")

# shouting: a paragraph of at least SHOUT_WORDS Latin-script words (a short heading in
# capitals is not one) whose letters are at least SHOUT_SHARE capitals (acronyms such as
# "NASA", "GDP" or "HK$" in ordinary text stay far below it); heading lines do not count
SHOUT_WORDS = 8
SHOUT_SHARE = 0.7
_LATIN_WORD = re.compile(r"[A-Za-z\u00c0-\u024f][A-Za-z\u00c0-\u024f'’$-]*")


def concludes(paragraph: str) -> bool:
    """Whether the paragraph opens as a conclusion: with a heading that names one, a
    label that does ("**Conclusion** The analysis…", "**结论：**…"), or a phrase that sums
    up ("In conclusion", "Overall,", "总之", "综上所述")."""
    line = paragraph.strip().split("\n", 1)[0]
    first = _MARKERS.sub("", line).strip()
    return bool(_HEADING.fullmatch(first) or _SUMS_UP.match(first) or _LABEL.match(line))


def shouting(paragraph: str) -> bool:
    """Whether the paragraph is written in capitals: SHOUT_WORDS Latin-script words or
    more, SHOUT_SHARE of their letters or more capitals; heading lines left out."""
    lines = [ln for ln in paragraph.splitlines() if not ln.lstrip().startswith("#")]
    words = _LATIN_WORD.findall("\n".join(lines))
    letters = [c for w in words for c in w if c.isalpha()]
    if len(words) < SHOUT_WORDS or not letters:
        return False
    return sum(c.isupper() for c in letters) >= SHOUT_SHARE * len(letters)
