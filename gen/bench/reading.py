"""What a reader of a bench document sees, as its run's manifest records it: per document
(reader_figures) and per case over its seeds, the worst seed's (reader_row). Fields a
manifest may not have yet (`chatter`, `chatter_share`, `relevance`) read as None."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

ON_TARGET = 80.0  # a section under this S_l is off its target and should say why


def reader_figures(manifest: dict[str, Any], shown: set[str]) -> dict[str, Any]:
    """What the manifest says of the sections in the document (`shown`): junk lines dropped
    (their sum), the share in the wanted script (weighted by words; None: any script),
    chatter sentences cut (their sum) and its share (the largest), relevance (the lowest),
    sections failed and why, sections truncated, and each section with a target that ended
    under S_l 80 with what it says of why (its reasons and its length plan's; None: it says
    nothing). A figure no section records (chatter and relevance before they were) is None."""
    sections = [s for s in manifest["sections"] if s["section"] in shown]
    done = [s for s in sections if s["status"] == "completed"]
    metrics = manifest["metrics"]
    chatter = [s["chatter"] for s in done if s.get("chatter") is not None]
    return {
        "junk": sum(s.get("junk", 0) for s in done),
        "language_share": _language_share(done),
        "chatter": sum(chatter) if chatter else None,
        "chatter_share": _worst((s.get("chatter_share") for s in done), max),
        "relevance": _worst((s.get("relevance") for s in done), min),
        "sections_failed": metrics.get("sections_failed", 0),
        "failed_reasons": metrics.get("failed_reasons", {}),
        "truncated": sum(bool(s.get("truncated")) for s in sections),
        "misses": [_miss(s) for s in sections if _off_target(s)],
        "cuts": _count(
            (r.get("repetition") or {}).get("kind") for s in done for r in s.get("rounds", [])
        ),
        "yields": _count(y["kind"] for s in done for y in s.get("yields", [])),
    }


def _count(kinds: Iterable[str | None]) -> dict[str, int]:
    """How many of each kind, by kind (None left out)."""
    counted: dict[str, int] = {}
    for kind in kinds:
        if kind is not None:
            counted[kind] = counted.get(kind, 0) + 1
    return dict(sorted(counted.items()))


def _off_target(section: dict[str, Any]) -> bool:
    score = section.get("length_score")
    return section.get("target_words") is not None and (score is None or score < ON_TARGET)


def _miss(section: dict[str, Any]) -> dict[str, Any]:
    """A section off its target: its S_l and why, as its manifest entry says."""
    plan = section.get("length_plan") or {}
    why = [*section.get("reasons", []), *([plan["why"]] if plan.get("why") else [])]
    return {
        "section": section["id"],
        "words": section["words"],
        "target_words": section["target_words"],
        "length_score": section.get("length_score"),
        "why": "; ".join(why) or None,
    }


def _language_share(sections: list[dict[str, Any]]) -> float | None:
    """The sections' share in the wanted script, weighted by their words; None: none is
    held to a script."""
    shares = [(s["language_share"], max(s["words"], 1))
              for s in sections if s.get("language_share") is not None]  # fmt: skip
    if not shares:
        return None
    return round(sum(v * w for v, w in shares) / sum(w for _, w in shares), 3)


def reader_row(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The reader's figures of a case over its seeds, each the worst seed's: the most junk,
    the lowest language share, the most chatter, the lowest relevance, the most sections
    failed (and every reason any seed gave, counted over the seeds), truncated and off
    target, and the most of those off target that say no reason."""
    reasons: dict[str, int] = {}
    for r in runs:
        for reason, n in r["failed_reasons"].items():
            reasons[reason] = reasons.get(reason, 0) + n
    return {
        "cuts": _summed(r.get("cuts", {}) for r in runs),
        "yields": _summed(r.get("yields", {}) for r in runs),
        "junk": max(r["junk"] for r in runs),
        "language_share": _worst((r["language_share"] for r in runs), min),
        "chatter": _worst((r["chatter"] for r in runs), max),
        "chatter_share": _worst((r["chatter_share"] for r in runs), max),
        "relevance": _worst((r["relevance"] for r in runs), min),
        "sections_failed": max(r["sections_failed"] for r in runs),
        "failed_reasons": dict(sorted(reasons.items())),
        "truncated": max(r["truncated"] for r in runs),
        "off_target": max(len(r["misses"]) for r in runs),
        "off_target_unexplained": max(sum(m["why"] is None for m in r["misses"]) for r in runs),
    }


def _summed(counts: Iterable[dict[str, int]]) -> dict[str, int]:
    """Counts by kind added up over the seeds."""
    return _count(kind for c in counts for kind, n in c.items() for _ in range(n))


def _worst(values: Iterable[Any], pick: Callable[[list[Any]], Any]) -> Any:
    """`pick` (min or max) of the values that are there; None when none is."""
    present = [v for v in values if v is not None]
    return pick(present) if present else None
