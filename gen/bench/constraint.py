"""`gen bench`'s constraint figure: what holding one row of a batch to a JSON schema costs
a token, beside a free row in the same steps, against two free rows and a free row alone.
Decoding only (the prefill step is not timed); the mask's own cost is timed apart."""

from __future__ import annotations

import json
import time
from typing import Any

from gen.engine import Engine, SamplingParams
from gen.engine.chat import encode_chat
from gen.models import LoadedModel
from gen.sampling import Constraint

# a schema that cannot close within the bench's tokens: every step is a masked step
SCHEMA = {
    "type": "object",
    "properties": {
        "topic": {"type": "string"},
        "notes": {"type": "array", "items": {"type": "string"}, "minItems": 64},
    },
    "required": ["topic", "notes"],
}
PROMPT = "Write notes on the history of tea, as JSON: a topic and a list of notes."


def _decode(engine: Engine, prompt: list[int], rows: list[SamplingParams]) -> list[float]:
    """Each row's decode tokens per second, all rows added in the same step; the clock
    starts after the first step (the prefill and each row's first token)."""
    ids = [engine.add_request(prompt, p) for p in rows]
    engine.step()  # 1) prefill: each row's first token
    start = time.perf_counter()
    tokens = dict.fromkeys(ids, 0)
    ended = dict.fromkeys(ids, start)
    while engine.has_unfinished():  # 2) decode
        outs = engine.step()
        now = time.perf_counter()
        for out in outs:
            tokens[out.request_id] += len(out.token_ids)
            ended[out.request_id] = now
    return [tokens[i] / max(ended[i] - start, 1e-9) for i in ids]


def constraint_cost(loaded: LoadedModel, engine: Engine, tokens: int, runs: int) -> dict[str, Any]:
    """Greedy rows of `tokens` tokens on one prompt; each layout `runs` times, taken in turn,
    the fastest counted (the machine drifts)."""
    constraint = Constraint("json_schema", json.dumps(SCHEMA))
    prompt = encode_chat(loaded.tokenizer, [{"role": "user", "content": PROMPT}])
    free = SamplingParams(max_tokens=tokens, temperature=0, ignore_eos=True)
    held = SamplingParams(max_tokens=tokens, temperature=0, constraint=constraint)

    # the first constrained request reads the tokenizer into llguidance, once per engine
    started = time.perf_counter()
    engine.grammars.state(constraint)
    tokenizer_s = time.perf_counter() - started
    started = time.perf_counter()
    engine.grammars.state(constraint)
    setup_ms = (time.perf_counter() - started) * 1000

    alone, pair, held_tps, beside_tps = 0.0, 0.0, 0.0, 0.0
    for _ in range(runs):
        alone = max(alone, *_decode(engine, prompt, [free]))
        pair = max(pair, min(_decode(engine, prompt, [free, free])))
        held_run, beside_run = _decode(engine, prompt, [held, free])
        held_tps, beside_tps = max(held_tps, held_run), max(beside_tps, beside_run)

    # the mask alone: the held row's tokens replayed through a fresh matcher
    written = engine.generate([prompt], held)[0].token_ids
    state = engine.grammars.state(constraint)
    started = time.perf_counter()
    for token in written:
        state.allowed(loaded.config.vocab_size)
        state.consume(token)
    mask_ms = (time.perf_counter() - started) * 1000 / max(len(written), 1)

    return {
        "new_tokens": tokens,
        "runs": runs,
        "alone_tokens_per_second": round(alone, 2),  # a free row alone
        "free_pair_tokens_per_second": round(pair, 2),  # each of two free rows
        "constrained_tokens_per_second": round(held_tps, 2),  # the held row beside a free one
        "beside_constrained_tokens_per_second": round(beside_tps, 2),  # that free row
        # a token of the held row against a token of a free row in a batch of two
        "overhead_ms_per_token": round(1000 / held_tps - 1000 / pair, 2),
        "time_ratio_vs_free": round(pair / held_tps, 3),  # its time a token over a free row's
        "mask_ms_per_token": round(mask_ms, 3),  # llguidance's mask and step, replayed
        "schema_setup_ms": round(setup_ms, 2),  # a request's schema compiled
        "tokenizer_setup_seconds": round(tokenizer_s, 2),  # once per engine
    }
