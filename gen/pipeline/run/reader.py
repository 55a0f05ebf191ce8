"""The checks for what a reader rejects, beside the loop checks on a section's streamed text:
lines and runs without a letter or digit never reach the text (a row of them is cut,
"junk"), text in another script than the one wanted is cut ("language"), and chatter (talk
about the writing, gen/text/chatter.py) at the text's opening or end is dropped, inside it
cut ("chatter"). A cut is a Repetition, retried like a loop. Knows nothing of backends or
requests."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from gen.engine.detokenizer import REPLACEMENT
from gen.pipeline.run.manifest import SectionRecord
from gen.pipeline.run.repetition import Kind, Repetition
from gen.pipeline.spec import Pipeline, Section
from gen.pipeline.templates.render import render_prompt
from gen.pipeline.templates.variables import SectionMap, SectionResult
from gen.text.chatter import Chatter, units
from gen.text.junk import JunkFilter, junk_line, syntax_line
from gen.text.language import (
    LanguageCheck,
    RareCheck,
    Script,
    language_share,
    simplified,
    wanted_script,
)

_END = re.compile(r"(?<!\d)[.!?…。！？][\"'”’)\]」』》）*_]*(?=\s|$)|[。！？]|\n")
_COLONS = (":", "：")
_CONTEXT = ("sources", "outline", "earlier", "previous")  # text a prompt may quote
# the opening is held until its first sentence of the text's own, or this many characters
OPENING_HELD = 400


def own_prompt(pipeline: Pipeline, section: Section, variables: dict[str, Any]) -> str:
    """The section's prompt as rendered, the earlier sections' text it quotes left out."""
    prompt = render_prompt(pipeline, section, variables)
    for name in _CONTEXT:
        quoted = str(variables.get(name) or "").strip()
        if quoted:
            prompt = prompt.replace(quoted, "")
    return prompt


def section_reader(
    prompt: str, system: str | None, variables: dict[str, Any], language: str
) -> Reader:
    """A section's reader checks, from its prompt (own_prompt) and system prompt: the script
    wanted is the `language:` setting's, or with auto the prompt's; the prompt and system
    are the instructions not to say again, and the values the prompt was filled with (a
    topic, a title, a plan's items, other sections' text) its subject, which the text may
    say; a Simplified Chinese prompt holds the text to common characters."""
    chatter = Chatter(prompt + "\n" + (system or ""), _strings(variables))
    return Reader(wanted_script(language, prompt), chatter, simplified(prompt))


def _strings(value: Any) -> Iterator[str]:
    """Every string in a prompt's variables."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, SectionResult):
        yield value.title
        yield value.text
        yield from value.items
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list | tuple | SectionMap):
        for v in value:
            yield from _strings(v)


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
    """One section's reader checks: its junk filter (for the whole section), a language
    check per stretch of text, from the start or a cut to the next cut (None when no script
    is wanted), and its chatter check; `reasons`: the checks that cut it, `chatter`: the
    chatter sentences dropped or cut."""

    def __init__(
        self, wanted: Script | None, chatter: Chatter | None = None, common: bool = False
    ) -> None:
        """`common`: the text is to be Simplified Chinese in its common characters (its
        prompt is), so a run of rare ones is gibberish."""
        self.wanted = wanted
        self.common = common and wanted == "cjk"
        self.rare: RareCheck | None = None
        self.junk = JunkFilter()
        self.language: LanguageCheck | None = None
        self.reasons: list[str] = []
        self.talk = chatter or Chatter()
        self.chatter = 0
        self._opening: str | None = ""  # the opening held until it is decided; None: done
        self._dropped = False  # chatter was dropped from the opening (the space after it goes)
        self._space = ""  # the space before the opening: it stays (a retry goes on a line)
        self._first = True  # the opening is the section's (nothing comes before it)
        self._read = 0  # where the chatter check has read the text to
        self._said: list[int] = []  # where chatter after the text's own sentences begins

    def begin(
        self, text: str, shown: int, flowing: bool, fresh: bool = True, restart: bool = False
    ) -> None:
        """A round starts on `text`; `flowing`: it goes on with the same stream (the junk
        filter's line goes on too), else the filter starts again at the text's end;
        `fresh`: the text was cut back, the language check starts again on it (else the
        one that has read it all goes on); `restart`: a new request's answer, whose opening
        may be chatter again."""
        if not flowing:
            self.junk.sync(text)
        if self.wanted is not None and (fresh or self.language is None):
            self.language = LanguageCheck(self.wanted, text, floor=shown)
            self.rare = RareCheck(text, floor=shown) if self.common else None
        if restart or not text.strip():
            self._opening, self._dropped, self._space = "", False, ""
            self._first = not text.strip()
        self._read = min(self._read, len(text))
        self._said = [at for at in self._said if at < len(text)]

    def flush(self) -> str:
        """What the junk filter and the opening hold, decided as they stand (a new request
        goes on from the text; a kv round would have gone on with the line)."""
        return self.opening(self.junk.flush(), final=True)

    def close(self, piece: str, text: str, flowing: bool) -> str:
        """The section's last piece without its junk; `flowing`: its last round ended uncut
        (else what the filter held lies past a cut)."""
        if not flowing:
            self.junk.sync(text)
        return self.opening(self.junk.feed(piece) + self.junk.finish(), final=True)

    def unbroken(self, piece: str) -> str:
        """The piece without broken bytes (U+FFFD, what the decoder writes for bytes that
        are no character), each counted as junk."""
        if REPLACEMENT in piece:
            self.junk.dropped += piece.count(REPLACEMENT)
            piece = piece.replace(REPLACEMENT, "")
        return piece

    def opening(self, piece: str, final: bool = False) -> str:
        """What of `piece` may be kept while the text's opening is read: chatter sentences
        (and lines without a letter or digit) at the start are dropped; everything from the
        first sentence of the text's own passes, and so does all after the opening. `final`:
        nothing more comes in this answer, what is held is decided as it stands. Broken
        bytes (U+FFFD) inside a line of text are dropped here, counted as junk."""
        piece = self.unbroken(piece)
        if self._opening is None:
            return piece
        held = self._opening + piece
        begin = 0
        for start, end in units(held):
            said = held[start:end]
            worded = any(c.isalnum() for c in said)
            markdown = not worded and syntax_line(said.lstrip("\r\n"))
            if (worded and self.talk.rule(said) is None) or markdown:
                break  # the text's own sentence, or Markdown (a fence, a rule)
            self.chatter += worded
            begin = end
        else:
            rest = held[begin:]
            if not final and len(rest) < OPENING_HELD:
                if begin and not self._dropped:
                    self._space = held[: len(held) - len(held.lstrip())]
                self._opening = rest.lstrip() if begin or self._dropped else rest
                self._dropped = self._dropped or begin > 0
                return ""
            if final and any(c.isalnum() for c in rest) and self.talk.rule(rest) is not None:
                self.chatter += 1
                begin = len(held)
        self._opening = None
        if not begin and not self._dropped:
            return held
        if not self._dropped:
            self._space = held[: len(held) - len(held.lstrip())]
        return ("" if self._first else self._space) + held[begin:].lstrip()

    def chatter_cut(self, text: str, shown: int, final: bool = False) -> Repetition | None:
        """Chatter inside the text: its sentences once one of the text's own follows them
        (chatter at the end is dropped when the section or answer ends, `trailing`).
        `final`: the answer has ended, its last sentence is read as it stands."""
        found = list(units(text, self._read))
        if final and text[found[-1][1] if found else self._read :].strip():
            found.append((found[-1][1] if found else self._read, len(text)))
        for start, end in found:
            self._read = end
            said = text[start:end]
            if not any(c.isalnum() for c in said):
                continue
            rule = self.talk.rule(said)
            if rule is not None:
                self._said.append(max(line_start(text, start), shown))
            elif self._said:
                start, count = self._said[0], len(self._said)
                self._said = []
                self.chatter += count
                detail = f"{count} sentences about the writing, not its subject: "
                detail += " ".join(text[start:].split())[:60]
                return self._cut("chatter", start, announced(text[:start], shown), detail)
        return None

    def trailing(self, text: str, shown: int) -> int:
        """Where the text ends without the chatter at its end ("I hope this helps!"), its
        last sentence read as it stands; never before `shown`. (What follows chatter that
        was not cut goes with it: the text's end has come.)"""
        self._said = [at for at in self._said if at < len(text)]
        read = self._read = min(self._read, len(text))
        for start, end in [*units(text, read), (-1, len(text))]:
            start = read if start < 0 else start
            said, read = text[start:end], end
            if any(c.isalnum() for c in said) and self.talk.rule(said) is not None:
                self._said.append(max(line_start(text, start), shown))
        if not self._said:
            return len(text)
        self.chatter += len(self._said)
        end = announced(text[: self._said[0]], shown)
        self._said = []
        self._read = end
        return end

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
        rare = self.rare.feed(piece, judge) if self.rare is not None else None
        if slip is None and rare is not None:
            start = max(line_start(text, rare.start), shown)
            detail = f"{rare.share:.0%} of the last {rare.words} Chinese characters are rare"
            return self._cut("gibberish", start, announced(text[:start], shown), detail)
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
        """The section's figures: junk dropped, its share of the wanted script, chatter
        dropped or cut, reasons."""
        record.junk = self.junk.dropped
        record.chatter = self.chatter
        record.language_share = None if self.wanted is None else language_share(text, self.wanted)
        record.reasons += [r for r in self.reasons if r not in record.reasons]

    def _cut(
        self, kind: Kind, start: int, keep: int, detail: str, words: tuple[str, ...] = ()
    ) -> Repetition:
        if kind not in self.reasons:
            self.reasons.append(kind)
        return Repetition(kind, start, keep, detail, tuple(w for w in words if w))
