"""Next-token choice from logits: penalties, temperature, top-k/top-p/min-p, seeded draws.

Each row samples with its own torch.Generator, and its penalties look at its own ids only,
so a request's draws don't depend on what else shares the batch. Order per row: banned ids,
logit_bias, repetition penalty, then the PenaltyState (frequency/presence, DRY, n-gram ban), then
temperature and the filters.
"""

from __future__ import annotations

import math
from collections.abc import Sequence as Seq

import numpy as np
import torch

from gen.engine.penalties import PenaltyState
from gen.sampling import SamplingParams, TokenLogprob

inf = float("inf")


def apply_repetition_penalty(
    logits: torch.Tensor, seen: torch.Tensor, penalty: float
) -> torch.Tensor:
    """Hugging Face's rule on a (vocab,) row: positive logits of seen ids are divided,
    negative ones multiplied. `seen` is a (vocab,) boolean mask."""
    penalised = torch.where(logits < 0, logits * penalty, logits / penalty)
    return torch.where(seen, penalised, logits)


def finite(row: torch.Tensor, fallback: torch.Tensor) -> torch.Tensor:
    """A (vocab,) row that extreme settings (a temperature or penalty near 0, huge penalties)
    pushed past float32 made samplable again: NaN is -inf, +inf the largest float; a row
    left with no finite logit at all is `fallback` (the model's own logits) instead."""
    top = torch.finfo(row.dtype).max
    row = torch.nan_to_num(row, nan=float("-inf"), posinf=top, neginf=float("-inf"))
    return row if bool(torch.isfinite(row).any()) else fallback


def filter_logits(logits: torch.Tensor, p: SamplingParams) -> torch.Tensor:
    """Temperature, then top-k, top-p and min-p masking on a (vocab,) row of float32 logits."""
    logits = finite(logits / p.temperature, logits)
    if p.top_k and p.top_k < logits.shape[-1]:
        kth = torch.topk(logits, p.top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if p.top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        drop = cum - sorted_logits.softmax(-1) >= p.top_p  # keep the token that crosses top_p
        drop[0] = False
        mask = torch.zeros_like(drop).scatter(0, order, drop)
        logits = logits.masked_fill(mask, float("-inf"))
    if p.min_p > 0.0:
        probs = logits.softmax(-1)
        logits = logits.masked_fill(probs < p.min_p * probs.max(), float("-inf"))
    return logits


def sample(
    logits: torch.Tensor,
    params: Seq[SamplingParams],
    generators: Seq[torch.Generator | None],
    seen: Seq[torch.Tensor | None],
    banned: Seq[tuple[int, ...]],
    penalties: Seq[PenaltyState | None] | None = None,
    allowed: Seq[torch.Tensor | None] | None = None,
) -> list[int]:
    """One token id per row of `logits` (B, vocab). seen[i]: a (vocab,) mask of the ids the
    repetition penalty applies to, or None; penalties[i]: the row's PenaltyState, or None;
    allowed[i]: a (vocab,) mask of the only ids a constraint lets come next, or None."""
    logits = logits.float()
    states = penalties if penalties is not None else [None] * len(params)
    masks = allowed if allowed is not None else [None] * len(params)
    plain = [
        p.greedy
        and masks[i] is None
        and not p.logit_bias
        and (p.repetition_penalty == 1.0 or seen[i] is None)
        and states[i] is None
        for i, p in enumerate(params)
    ]
    # plain greedy rows: one argmax over the batch (numpy's: a tenth of torch's time over
    # a vocabulary; the first of the largest). It stands where it is finite and not
    # banned (then it is also the argmax without the banned ids); else the row goes the
    # long way below, which bans, and counts NaN as -inf.
    argmax: list[int] = []
    tops: list[float] = []
    if any(plain):
        table = logits.numpy()
        found = table.argmax(-1)
        argmax, tops = found.tolist(), table[np.arange(len(found)), found].tolist()
    out: list[int] = []
    for i, p in enumerate(params):
        if plain[i] and argmax[i] not in banned[i] and math.isfinite(tops[i]):
            out.append(int(argmax[i]))
            continue
        row = logits[i]
        if banned[i]:
            row = row.clone()
            row[list(banned[i])] = float("-inf")
        bias = [(t, b) for t, b in p.logit_bias if t < row.shape[0]]  # (ids past the vocab: none)
        if bias:
            ids, values = zip(*bias, strict=True)
            row = row.index_add(0, torch.tensor(ids), torch.tensor(values, dtype=row.dtype))
        mask = seen[i]
        if p.repetition_penalty != 1.0 and mask is not None:
            row = apply_repetition_penalty(row, mask, p.repetition_penalty)
        state = states[i]
        if state is not None:
            row = state.apply(row)
        only = masks[i]
        fallback = logits[i]
        if only is not None:  # the constraint: nothing else may come next
            row, fallback = row.masked_fill(~only, -inf), fallback.masked_fill(~only, -inf)
        if p.greedy:
            best = int(torch.argmax(row))
            # argmax takes NaN and +inf first: a finite winner means `finite` changes nothing
            if not math.isfinite(float(row[best])):
                best = int(torch.argmax(finite(row, fallback)))
            out.append(best)
            continue
        row = finite(row, fallback)
        probs = filter_logits(row, p).softmax(-1)
        out.append(int(torch.multinomial(probs, 1, generator=generators[i])))
    return out


def token_logprobs(logits: torch.Tensor, tokens: Seq[int], top: Seq[int]) -> list[TokenLogprob]:
    """The model's log probabilities (log_softmax of its logits (B, vocab), before any
    penalty, temperature or filter) of each row's token and of its top[i] likeliest."""
    out = []
    for logit_row, token, k in zip(logits, tokens, top, strict=True):
        # row by row: a batched reduction's bits may depend on the batch's size
        row = torch.log_softmax(logit_row.float(), dim=-1)  # (vocab,)
        best = torch.topk(row, k) if k else None
        pairs = zip(best.indices.tolist(), best.values.tolist(), strict=True) if best else ()
        out.append(TokenLogprob(token, float(row[token]), tuple(pairs)))
    return out
