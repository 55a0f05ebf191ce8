"""What each round of a section leaves behind: its RoundRecord (the manifest), the request
it sent (prompts/<key>.json) and the fields of its `round_finished` event."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from gen.backends.base import Delta
from gen.pipeline.run.budget import Fitted
from gen.pipeline.run.continuation import RoundMode
from gen.pipeline.run.manifest import RoundRecord
from gen.pipeline.run.repetition import ENDING_CUTS, READER_CUTS, Repetition
from gen.sampling import SamplingParams


def round_record(
    final: Delta | None,
    fitted: Fitted,
    mode: RoundMode,
    seconds: float,
    cut: str | Repetition | None,
    retry: int,
    counted: Callable[[], int],
) -> RoundRecord:
    """The round's record: `final` its last delta (None: cut before the backend reported
    usage; then `counted()` gives its completion tokens), `cut` why the section cut it
    ("words", a sibling's title, the Repetition found), `retry` the retries before it."""
    reason: int | str | None = None
    if isinstance(cut, Repetition):
        named = cut.kind in READER_CUTS or cut.kind in ENDING_CUTS
        reason = cut.kind if named else "repetition"
    elif cut is not None:
        reason = "target_words" if cut == "words" else cut  # (else a sibling's title)
    if final is not None:
        record = RoundRecord(
            finish_reason="stop" if cut is not None else final.finish_reason or "stop",
            prompt_tokens=final.prompt_tokens or fitted.prompt_tokens,
            cached_prompt_tokens=final.cached_prompt_tokens,
            completion_tokens=final.completion_tokens,
            trimmed_tokens=fitted.trimmed_tokens,
            seconds=seconds,
            strategy=mode,
            stop_reason=reason if cut is not None else final.stop_reason,
            retry=retry,
            server_retries=final.retries,
            replica=final.replica or None,
        )
    else:  # cut before the backend reported usage
        record = RoundRecord(
            finish_reason="stop",
            prompt_tokens=fitted.prompt_tokens,
            cached_prompt_tokens=fitted.prompt_tokens if mode == "kv" else 0,
            # usage never arrived: count the round's text with the model's tokenizer
            completion_tokens=counted(),
            trimmed_tokens=fitted.trimmed_tokens,
            seconds=seconds,
            strategy=mode,
            retry=retry,
            stop_reason=reason,
        )
    if isinstance(cut, Repetition):
        record.repetition = {"kind": cut.kind, "detail": cut.detail}
    return record


def request_entry(
    round_no: int, record: RoundRecord, fitted: Fitted, params: SamplingParams
) -> dict[str, Any]:
    """What one round sent: the messages (a kv round sends none: it decodes on in the
    same sequence), the sampling settings with the seed, and the tokens."""
    sampling_json = asdict(params)
    for name in ("stop", "stop_token_ids", "dry_sequence_breakers"):
        sampling_json[name] = list(sampling_json[name])
    mode = record.strategy
    entry: dict[str, Any] = {
        "round": round_no,
        "strategy": mode,
        "messages": fitted.messages if mode != "kv" else None,
        "continue_final_message": mode == "prefix",
        "sampling": sampling_json,
        "prompt_tokens": record.prompt_tokens,
        "cached_prompt_tokens": record.cached_prompt_tokens,
        "completion_tokens": record.completion_tokens,
        "trimmed_tokens": record.trimmed_tokens,
        "trimmed_characters": dict(fitted.trimmed),
        "finish_reason": record.finish_reason,
        "stop_reason": record.stop_reason,
    }
    return entry


def round_event(record: RoundRecord, words: int) -> dict[str, Any]:
    """The `round_finished` event's fields after its section and round; `words`: the
    section's so far."""
    seconds = record.seconds
    return {
        "finish_reason": record.finish_reason,
        "stop_reason": record.stop_reason,
        "strategy": record.strategy,
        "prompt_tokens": record.prompt_tokens,
        "cached_prompt_tokens": record.cached_prompt_tokens,
        "completion_tokens": record.completion_tokens,
        "trimmed_tokens": record.trimmed_tokens,
        "words": words,
        "retry": record.retry,
        "repetition": record.repetition,
        "server_retries": record.server_retries,
        "seconds": round(seconds, 3),
        "tokens_per_second": round(record.completion_tokens / seconds, 2) if seconds > 0 else 0.0,
    }
