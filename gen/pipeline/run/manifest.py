"""What a run records per round and per section, as written to manifest.json."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gen.pipeline.run.repetition import READER_CUTS
from gen.text.coherence import OutlineCheck


@dataclass(slots=True)
class RoundRecord:
    finish_reason: str
    prompt_tokens: int
    cached_prompt_tokens: int
    completion_tokens: int
    trimmed_tokens: int
    seconds: float
    strategy: str = "initial"  # initial | kv | prefix | chat | more
    stop_reason: int | str | None = None  # also "target_words", "repetition", READER_CUTS
    retry: int = 0  # retries after a loop before this round
    repetition: dict[str, str] | None = None  # what loop ended this round
    server_retries: int = 0  # requests sent again: a remote server failed, throttled or dropped
    replica: str | None = None  # the remote server that served (the end of) the round

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["seconds"] = round(self.seconds, 3)
        if self.repetition is None:
            del data["repetition"]
        if not self.server_retries:
            del data["server_retries"]
        if self.replica is None:
            del data["replica"]
        return data


@dataclass(slots=True)
class SectionRecord:
    key: str  # the file name under sections/: the id, or <id>-<n> in a fan-out
    section: str  # the section id in the pipeline
    title: str
    status: str = "pending"  # pending | running | completed | failed | cancelled | skipped
    cached: bool = False
    text: str = ""
    items: list[str] = field(default_factory=list)
    target_words: int | None = None
    truncated: bool = False
    rounds: list[RoundRecord] = field(default_factory=list)
    input_hash: str = ""
    error: str | None = None
    words: int = 0
    length_score: float | None = None
    seed: int | None = None
    degenerate: bool = False  # it looped again after every retry; the loops were cut away
    distinct_4: float = 1.0
    repeated_sentences: float = 0.0  # the share of sentences that repeat an earlier one
    overlap: float | None = None  # the share of its 5-grams earlier sections hold (run end)
    ended_by: str | None = None  # a remote server ended it: content_filter, tool_calls, ...
    junk: int = 0  # lines and runs without a letter or digit dropped from its text
    language_share: float | None = None  # its words' share in the wanted script (None: any)
    chatter: int = 0  # sentences about the writing dropped (opening, end) or cut (inside)
    relevance: float | None = None  # its paragraphs' mean gain from the topic (relevance.py)
    reasons: list[str] = field(default_factory=list)  # what cut it or made it fail, once each
    length_plan: dict[str, Any] | None = None  # its rounds and target's reach (length.py)
    shown: list[Any] = field(default_factory=list)  # the citing.Shown passages it was given
    citing: dict[str, Any] | None = None  # its citations' figures (citing.Cited)
    unfinished: str | None = None  # the sentence its last round was cut off in, dropped
    # the checks that cut every retry and then yielded: {"kind", "detail"} each
    yields: list[dict[str, str]] = field(default_factory=list)
    # a section written from a plan of points: its points and where each began (points.py)
    plan: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.key,
            "section": self.section,
            "title": self.title,
            "status": self.status,
            "cached": self.cached,
            "words": self.words,
            "target_words": self.target_words,
            "length_plan": self.length_plan,
            "length_score": None if self.length_score is None else round(self.length_score, 1),
            "truncated": self.truncated,
            "degenerate": self.degenerate,
            "reasons": self.reasons,
            "distinct_4": round(self.distinct_4, 3),
            "repeated_sentences": round(self.repeated_sentences, 3),
            "overlap": None if self.overlap is None else round(self.overlap, 3),
            "junk": self.junk,
            "chatter": self.chatter,
            "language_share": None
            if self.language_share is None
            else round(self.language_share, 3),
            "relevance": self.relevance,
            "seed": self.seed,
            "rounds": [r.to_json() for r in self.rounds],
            "input_hash": self.input_hash,
        }
        if self.items:
            data["items"] = self.items
        if self.error:
            data["error"] = self.error
        if self.ended_by:
            data["ended_by"] = self.ended_by
        if self.unfinished:
            data["unfinished"] = self.unfinished
        if self.yields:
            data["yields"] = self.yields
        if self.plan is not None:
            data["plan"] = self.plan
        if self.shown:
            data["passages"] = [s.to_json() for s in self.shown]
        if self.citing is not None:
            data["citing"] = self.citing
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], text: str) -> SectionRecord:
        rounds = [RoundRecord(**r) for r in data.get("rounds", [])]
        return cls(
            key=data["id"],
            section=data.get("section", data["id"]),
            title=data.get("title", ""),
            status=data.get("status", "pending"),
            text=text,
            items=list(data.get("items", [])),
            target_words=data.get("target_words"),
            truncated=bool(data.get("truncated", False)),
            rounds=rounds,
            input_hash=data.get("input_hash", ""),
            words=int(data.get("words", 0)),
            length_score=data.get("length_score"),
            seed=data.get("seed"),
            degenerate=bool(data.get("degenerate", False)),
            distinct_4=float(data.get("distinct_4", 1.0)),
            repeated_sentences=float(data.get("repeated_sentences", 0.0)),
            overlap=data.get("overlap"),
            ended_by=data.get("ended_by"),
            junk=int(data.get("junk", 0)),
            chatter=int(data.get("chatter", 0)),
            language_share=data.get("language_share"),
            relevance=data.get("relevance"),
            reasons=list(data["reasons"]) if "reasons" in data else _old_reasons(data),
            yields=list(data.get("yields", [])),
            plan=data.get("plan"),
            length_plan=data.get("length_plan"),
            citing=data.get("citing"),
            unfinished=data.get("unfinished"),
        )


def _old_reasons(data: dict[str, Any]) -> list[str]:
    """The reasons of a section from a manifest written before they were recorded: a
    degenerate section then ended in a loop (its last round cut for repetition) or stalled."""
    reasons = []
    if data.get("degenerate"):
        rounds = data.get("rounds") or [{}]
        reasons.append("loops" if rounds[-1].get("stop_reason") == "repetition" else "stalled")
    if data.get("truncated"):
        reasons.append("truncated")
    return reasons


def continuation_success_rate(records: list[SectionRecord]) -> float | None:
    """Of the sections that needed continuing (the first round ran out of tokens, or there
    was more than one round), the share that completed without being truncated. None when
    no section needed continuing: there was nothing to succeed at, and 1.0 would read as a
    success on a run where every section failed at once."""
    needed = [
        r
        for r in records
        if len(r.rounds) > 1 or (r.rounds and r.rounds[0].finish_reason == "length")
    ]
    if not needed:
        return None
    done = sum(r.status == "completed" and not r.truncated for r in needed)
    return round(done / len(needed), 3)


def failed(rec: SectionRecord) -> bool:
    """Did the section fail? An error ended it, its text kept failing a check after its
    retries (degenerate), or it has a target and ended truncated short of it."""
    short = rec.truncated and rec.target_words is not None and rec.words < rec.target_words
    return rec.status == "failed" or rec.degenerate or short


def failed_reasons(records: list[SectionRecord]) -> dict[str, int]:
    """How many failed sections each reason holds (a section with two counts under both)."""
    counts: dict[str, int] = {}
    for rec in records:
        if failed(rec):
            for reason in dict.fromkeys(rec.reasons):
                counts[reason] = counts.get(reason, 0) + 1
    return dict(sorted(counts.items()))


def run_metrics(
    records: list[SectionRecord],
    window: int,
    seconds: float,
    outline: OutlineCheck | None = None,
) -> dict[str, Any]:
    """The run's figures; `outline`: the finished document checked against its outline."""
    done = [r for r in records if r.status == "completed"]
    overlaps = [r.overlap for r in done if r.overlap is not None]
    rounds = [rd for r in records for rd in r.rounds]
    completion = sum(rd.completion_tokens for rd in rounds)
    generated = sum(rd.completion_tokens for r in records if not r.cached for rd in r.rounds)
    utilization = [(rd.prompt_tokens + rd.completion_tokens) / window for rd in rounds if window]
    return {
        "sections": len(records),
        "sections_completed": len(done),
        "sections_truncated": sum(r.truncated for r in records),
        "rounds_avg": round(len(rounds) / len(records), 2) if records else 0.0,
        "continuation_success_rate": continuation_success_rate(records),
        "context_utilization_max": round(max(utilization, default=0.0), 3),
        "prompt_tokens": sum(rd.prompt_tokens for rd in rounds),
        "cached_prompt_tokens": sum(rd.cached_prompt_tokens for rd in rounds),
        "completion_tokens": completion,
        "trimmed_tokens": sum(rd.trimmed_tokens for rd in rounds),
        "words": sum(r.words for r in records),
        "sections_degenerate": sum(r.degenerate for r in records),
        "sections_failed": sum(failed(r) for r in records),
        "failed_reasons": failed_reasons(records),
        "distinct_4_min": round(min((r.distinct_4 for r in done), default=1.0), 3),
        "repeated_sentences_max": round(max((r.repeated_sentences for r in done), default=0.0), 3),
        "repetition_retries": sum(rd.stop_reason == "repetition" for rd in rounds),
        "reader_retries": sum(rd.stop_reason in READER_CUTS for rd in rounds),
        # coherence, once the document is written: None before (or without an outline)
        "overlap_max": round(max(overlaps), 3) if overlaps else None,
        "outline_followed": None if outline is None else outline.followed,
        "outline_missing": [] if outline is None else outline.missing,
        "headings_repeated": [] if outline is None else outline.repeated,
        "server_retries": sum(rd.server_retries for rd in rounds),
        "seconds": round(seconds, 3),
        # the tokens this run generated: a resumed run's reused sections took no time here
        "tokens_per_second": round(generated / seconds, 2) if seconds > 0 else 0.0,
    }
