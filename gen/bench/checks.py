"""`gen bench --checks`: how often gen's loop and reader checks cut good text. Each document
of a corpus of good writing (gen/bench/corpus/: plans, dialogue, reports with figures,
speeches with required labels, essays, stories; English and Chinese) is replayed through a
real section run as if a model wrote it, token by token and round by round: every cut is a
false cut. A retry writes the same text again from where it was cut back, as a model sure
of its text would, so a check that cuts good text twice over shows as a stall or a yield.
Drift is judged by the model's probabilities, which a replay has none of: not measured."""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from gen.backends.base import Delta, Message
from gen.pipeline import load_pipeline_text
from gen.sampling import SamplingParams
from gen.text.words import count_words

# a document replayed as a user asks for it: its prompt, nothing else; rounds enough for
# any corpus text (the budget is the section's only limit without a target)
CASE_YAML = """
name: checks-{name}
model: replay
defaults: {{max_tokens: 96, max_rounds: 2000}}
sections:
  - id: body
    prompt: {prompt}
"""
PER_WORDS = 10_000  # rates are cuts per this many words
# a replayed token: a run of letters (with the spaces before it), or one other character
_TOKEN = re.compile(r"\s*[A-Za-z\u00c0-\u024f0-9'’]+|\s*\S|\s+")
TAIL_CHARS = 40  # a prefix round's text is found in the document by its last characters


@dataclass(frozen=True, slots=True)
class Document:
    name: str
    prompt: str
    kind: str
    language: str
    text: str

    @property
    def words(self) -> int:
        return count_words(self.text)


def corpus_dir() -> Path:
    return Path(str(resources.files("gen.bench") / "corpus"))


def load_corpus(folder: Path | None = None) -> list[Document]:
    """Every `*.md` in the folder: YAML front matter (prompt, kind, language), then the
    text as a model's answer."""
    docs = []
    for path in sorted((folder or corpus_dir()).glob("*.md")):
        raw = path.read_text("utf-8")
        _, head, text = raw.split("---\n", 2)
        meta = yaml.safe_load(head)
        docs.append(
            Document(path.stem, meta["prompt"], meta["kind"], meta["language"], text.strip())
        )
    return docs


def pieces(text: str) -> list[str]:
    """The replay's tokens: a word with the spaces before it, or one other character (a
    CJK character, a mark)."""
    return _TOKEN.findall(text)


class ReplayStream:
    def __init__(self, flow: list[str], budget: int) -> None:
        self.flow = flow  # the tokens still to write
        self.budget = budget
        self.parked = False

    async def deltas(self) -> AsyncIterator[Delta]:
        out, self.flow = self.flow[: self.budget], self.flow[self.budget :]
        for token in out[:-1]:
            yield Delta(token)
        finish = "length" if self.flow else "stop"
        self.parked = finish == "length"
        last = out[-1] if out else ""
        yield Delta(last, finish_reason=finish, prompt_tokens=1, completion_tokens=len(out))
        await asyncio.sleep(0)

    async def resume(self, max_tokens: int) -> None:
        self.parked, self.budget = False, max_tokens

    async def close(self) -> str:
        return ""


class ReplayBackend:
    """A Backend that writes one document: a new request writes on from where its open
    assistant message ends in the document (a retry writes the cut text again), else from
    where the last request ended."""

    name = "replay"
    model = "replay"
    context_window = 10_000_000
    supports_kv = True
    supports_grammar = False
    dtype = None

    def __init__(self, text: str) -> None:
        self.text = text
        self.cursor = 0

    def count_text(self, text: str) -> int:
        return len(pieces(text))

    def count_tokens(self, messages: list[Message]) -> int:
        return sum(self.count_text(m["content"]) for m in messages)

    def word_ids(self, word: str) -> list[int]:
        return []

    async def chat(
        self,
        messages: list[Message],
        params: SamplingParams,
        *,
        hold: bool = False,
        continue_final: bool = False,
    ) -> ReplayStream:
        start = self.cursor
        if continue_final:
            start = self._after(messages[-1]["content"])
        self.cursor = len(self.text)
        return ReplayStream(pieces(self.text[start:]), params.max_tokens)

    def _after(self, prefix: str) -> int:
        if self.text.startswith(prefix):
            return len(prefix)
        tail = prefix.rstrip()[-TAIL_CHARS:]
        at = self.text.find(tail) if tail else -1
        return at + len(tail) if at >= 0 else self.cursor

    async def score(
        self, contexts: list[list[Message]], text: str, limit: int | None = None
    ) -> None:
        return None

    async def aclose(self) -> None:
        return None


def replay(doc: Document, root: Path) -> dict[str, Any]:
    """One document through a section run; its cuts (each check's, where they fell), yields
    and how the section ended."""
    from gen.pipeline.run.runner import prepare_run

    text = CASE_YAML.format(name=doc.name, prompt=json.dumps(doc.prompt, ensure_ascii=False))
    pipeline = load_pipeline_text(text, file=f"{doc.name}.yaml")
    backend = ReplayBackend(doc.text)
    prepared = prepare_run(pipeline, backend, root, model="replay")  # type: ignore[arg-type]
    manifest = asyncio.run(prepared.execute())
    (section,) = manifest["sections"]
    cuts = [
        {"kind": r["repetition"]["kind"], "detail": r["repetition"]["detail"]}
        for r in section["rounds"]
        if r.get("repetition")
    ]
    kept = prepared.run_dir.section_path("body").read_text("utf-8")
    return {
        "name": doc.name,
        "language": doc.language,
        "kind": doc.kind,
        "words": doc.words,
        "kept_words": count_words(kept),
        "cuts": cuts,
        "yields": section.get("yields", []),
        "reasons": section["reasons"],
        "degenerate": section["degenerate"],
        "chatter": section.get("chatter", 0),
        "junk": section.get("junk", 0),
    }


def run_checks(folder: Path | None, note: Callable[[str], None]) -> dict[str, Any]:
    """Every corpus document replayed; per language and check: cuts, and cuts per
    PER_WORDS words."""
    docs = load_corpus(folder)
    if not docs:
        raise ValueError(f"no corpus documents (*.md) in {folder or corpus_dir()}")
    runs = []
    with tempfile.TemporaryDirectory(prefix="gen-checks-") as root:
        for doc in docs:
            note(f"{doc.name}: replaying {doc.words} words")
            runs.append(replay(doc, Path(root)))
    languages: dict[str, dict[str, Any]] = {}
    for lang in sorted({r["language"] for r in runs}):
        mine = [r for r in runs if r["language"] == lang]
        words = sum(r["words"] for r in mine)
        cuts = Counter(c["kind"] for r in mine for c in r["cuts"])
        # a place: a document's cut with its detail, however often the retries cut it again
        places = Counter(
            kind for r in mine for kind, _ in {(c["kind"], c["detail"]) for c in r["cuts"]}
        )
        languages[lang] = {
            "documents": len(mine),
            "words": words,
            "cuts": dict(cuts),
            "places": dict(places),
            "per_10k": {k: round(n * PER_WORDS / words, 2) for k, n in places.items()},
            "dropped_chatter": sum(r["chatter"] for r in mine),
            "yields": sum(len(r["yields"]) for r in mine),
            "short": [r["name"] for r in mine if r["kept_words"] < 0.98 * r["words"]],
        }
    return {"languages": languages, "runs": runs}


def cut_lines(result: dict[str, Any]) -> Iterator[str]:
    """The report: per language, words read and each check's places cut (and cuts, with
    the retries' own); then every cut."""
    for lang, row in result["languages"].items():
        cuts = ", ".join(
            f"{k} {n} places, {row['cuts'][k]} cuts ({row['per_10k'][k]} places/10k words)"
            for k, n in row["places"].items()
        )
        yield (
            f"{lang}: {row['documents']} documents, {row['words']} words: {cuts or 'no cuts'}; "
            f"chatter dropped {row['dropped_chatter']}, yields {row['yields']}"
        )
        if row["short"]:
            yield f"  kept short of the text: {', '.join(row['short'])}"
    for r in result["runs"]:
        for c in r["cuts"]:
            yield f"  {r['name']}: {c['kind']}: {c['detail']}"
        for y in r["yields"]:
            yield f"  {r['name']}: yielded {y}"
