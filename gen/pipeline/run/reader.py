"""The checks for what a reader rejects, beside the loop checks on a section's streamed text:
lines and runs without a letter or digit never reach the text (a row of them is cut,
"junk"), and text in another script than the one wanted is cut ("language"). A cut is a
Repetition, retried like a loop. Knows nothing of backends or requests."""

from __future__ import annotations

import re
from typing import Any

from gen.pipeline.run.manifest import SectionRecord
from gen.pipeline.run.repetition import Kind, Repetition
from gen.pipeline.spec import Pipeline, Section
from gen.pipeline.templates.render import render_prompt
from gen.text.junk import JunkFilter, junk_line
from gen.text.language import LanguageCheck, Script, language_share, wanted_script

_END = re.compile(r"(?<!\d)[.!?…。！？][\"'”’)\]」』》）*_]*(?=\s|$)|[。！？]|\n")
_COLONS = (":", "：")
_CONTEXT = ("outline", "earlier", "previous")  # text of other sections a prompt may quote


def prompt_wanted(
    pipeline: Pipeline, section: Section, variables: dict[str, Any], language: str
) -> Script | None:
    """The script a section is to be written in: its `language:` setting's, or with auto
    its prompt's, the earlier sections' text the prompt quotes left out."""
    if language != "auto":
        return wanted_script(language, "")
    prompt = render_prompt(pipeline, section, variables)
    for name in _CONTEXT:
        quoted = str(variables.get(name) or "").strip()
        if quoted:
            prompt = prompt.replace(quoted, "")
    return wanted_script(language, prompt)


def sound_end(text: str, floor: int) -> int:
    """Where text cut for junk ends: after its last full sentence or line; a last line
    that ends with a colon goes too (it announced what was cut). Never before `floor`."""
    ends = [m.end() for m in _END.finditer(text, floor)]
    return announced(text[: ends[-1] if ends else floor], floor)


def announced(text: str, floor: int) -> int:
    """len(text) without its trailing space, and without its last line where that ends
    with a colon; never before `floor`."""
    kept = text.rstrip()
    if kept.endswith(_COLONS):
        kept = kept[: kept.rfind("\n") + 1].rstrip()
    return max(len(kept), floor)


def line_start(text: str, start: int) -> int:
    """`start`, or the start of its line where only markers and space come before it."""
    begin = text.rfind("\n", 0, start) + 1
    return begin if not any(c.isalnum() for c in text[begin:start]) else start


class Reader:
    """One section's reader checks: its junk filter (for the whole section) and a language
    check per stretch of text, from the start or a cut to the next cut (None when no
    script is wanted); `reasons`: the checks that cut it."""

    def __init__(self, wanted: Script | None) -> None:
        self.wanted = wanted
        self.junk = JunkFilter()
        self.language: LanguageCheck | None = None
        self.reasons: list[str] = []

    def begin(self, text: str, shown: int, flowing: bool, fresh: bool = True) -> None:
        """A round starts on `text`; `flowing`: it goes on with the same stream (the junk
        filter's line goes on too), else the filter starts again at the text's end;
        `fresh`: the text was cut back, the language check starts again on it (else the
        one that has read it all goes on)."""
        if not flowing:
            self.junk.sync(text)
        if self.wanted is not None and (fresh or self.language is None):
            self.language = LanguageCheck(self.wanted, text, floor=shown)

    def flush(self) -> str:
        """What the junk filter holds, decided as it stands (a new request goes on from the
        text; a kv round would have gone on with the line)."""
        return self.junk.flush()

    def close(self, piece: str, text: str, flowing: bool) -> str:
        """The section's last piece without its junk; `flowing`: its last round ended uncut
        (else what the filter held lies past a cut)."""
        if not flowing:
            self.junk.sync(text)
        return self.junk.feed(piece) + self.junk.finish()

    def junk_cut(self, text: str, shown: int) -> Repetition | None:
        """A row of junk: the text goes back to its last sound sentence."""
        if not self.junk.due:
            return None
        junk = self.junk
        rows = f"{junk.row_lines} lines" if junk.row_lines else f"{junk.row_chars} characters"
        detail = f"{rows} without a letter or digit in a row"
        return self._cut("junk", len(text), sound_end(text, shown), detail, (junk.first,))

    def language_cut(
        self, piece: str, text: str, shown: int, judge: bool = True
    ) -> Repetition | None:
        """The text has gone over to another script: it is cut where it did. `judge`
        False: the piece is read, not judged (a seam the pipeline added)."""
        slip = self.language.feed(piece, judge) if self.language is not None else None
        if slip is None:
            return None
        start = max(line_start(text, slip.start), shown)
        script = "CJK" if self.wanted == "cjk" else "Latin"
        detail = f"{slip.share:.0%} of the last {slip.words} words in the {script} script"
        return self._cut("language", start, announced(text[:start], shown), detail)

    def end(self, text: str, shown: int) -> int:
        """Where the finished text ends: a last line that is junk (a list marker left
        alone at a round's end) is dropped."""
        end = len(text.rstrip())
        begin = text.rfind("\n", 0, end) + 1
        return max(begin, shown) if junk_line(text[begin:end]) else len(text)

    def record(self, record: SectionRecord, text: str) -> None:
        """The section's figures: junk dropped, its share of the wanted script, reasons."""
        record.junk = self.junk.dropped
        record.language_share = None if self.wanted is None else language_share(text, self.wanted)
        record.reasons += [r for r in self.reasons if r not in record.reasons]

    def _cut(
        self, kind: Kind, start: int, keep: int, detail: str, words: tuple[str, ...] = ()
    ) -> Repetition:
        if kind not in self.reasons:
            self.reasons.append(kind)
        return Repetition(kind, start, keep, detail, tuple(w for w in words if w))
