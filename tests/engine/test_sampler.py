"""Logit filters and per-row sampling on hand-made logits."""

from __future__ import annotations

import pytest
import torch

from gen.engine import SamplingParams
from gen.engine.sampler import apply_repetition_penalty, filter_logits, sample

# probabilities 0.5, 0.25, 0.125, 0.0625, 0.0625
LOGITS = torch.tensor([0.5, 0.25, 0.125, 0.0625, 0.0625]).log()


def kept(p: SamplingParams) -> list[int]:
    return torch.isfinite(filter_logits(LOGITS.clone(), p)).nonzero().flatten().tolist()


def test_top_k_keeps_the_k_best() -> None:
    assert kept(SamplingParams(top_k=2)) == [0, 1]
    assert kept(SamplingParams(top_k=0)) == [0, 1, 2, 3, 4]


def test_top_p_keeps_the_token_that_crosses_it() -> None:
    assert kept(SamplingParams(top_p=0.5)) == [0]
    assert kept(SamplingParams(top_p=0.6)) == [0, 1]
    assert kept(SamplingParams(top_p=0.8)) == [0, 1, 2]
    assert kept(SamplingParams(top_p=0.01)) == [0]  # never empty


def test_min_p_is_relative_to_the_best_token() -> None:
    assert kept(SamplingParams(min_p=0.3)) == [0, 1]  # 0.25 >= 0.3 * 0.5
    assert kept(SamplingParams(min_p=0.2)) == [0, 1, 2]


def test_temperature_scales_before_filtering() -> None:
    out = filter_logits(LOGITS.clone(), SamplingParams(temperature=0.5))
    assert torch.allclose(out, LOGITS * 2)


def test_repetition_penalty_follows_hugging_face() -> None:
    row = torch.tensor([2.0, -2.0, 1.0, -1.0])
    seen = torch.tensor([True, True, False, False])
    out = apply_repetition_penalty(row.clone(), seen, 2.0)
    assert out.tolist() == [1.0, -4.0, 1.0, -1.0]


def test_greedy_with_a_repetition_penalty_avoids_a_seen_id() -> None:
    logits = torch.tensor([[3.0, 2.0, 1.0], [3.0, 2.0, 1.0]])
    p = SamplingParams(temperature=0, repetition_penalty=2.0)
    seen = torch.tensor([True, False, False])
    # row 0 has seen id 0 (3.0 -> 1.5 < 2.0); row 1 has no mask and keeps the argmax
    assert sample(logits, [p, p], [None, None], [seen, None], [(), ()]) == [1, 0]


def test_greedy_rows_take_the_argmax_and_respect_banned_ids() -> None:
    logits = torch.tensor([[0.0, 3.0, 1.0], [5.0, 1.0, 4.0]])
    greedy = SamplingParams(temperature=0)
    assert sample(logits, [greedy, greedy], [None, None], [None, None], [(), ()]) == [1, 0]
    assert sample(logits, [greedy, greedy], [None, None], [None, None], [(1,), (0,)]) == [2, 2]


def test_each_row_draws_from_its_own_generator() -> None:
    logits = torch.zeros(2, 1000)  # uniform: every draw depends on the generator only
    p = SamplingParams(temperature=1.0)

    def draws(seed_a: int, seed_b: int) -> list[int]:
        gens = [torch.Generator().manual_seed(seed_a), torch.Generator().manual_seed(seed_b)]
        return sample(logits, [p, p], gens, [None, None], [(), ()])

    assert draws(1, 2)[0] == draws(1, 3)[0]
    assert draws(1, 2)[1] == draws(5, 2)[1]
    assert draws(1, 2)[0] != draws(4, 2)[0]


def test_logit_bias_shifts_only_the_named_tokens_of_its_own_row() -> None:
    logits = torch.stack([LOGITS, LOGITS])
    biased = SamplingParams(temperature=0, logit_bias={0: -100.0, 3: 2.0, 99: 5.0})
    plain = SamplingParams(temperature=0)
    # row 0: token 0 is banned, token 3 gains 2 (0.0625 * e**2 > 0.25); id 99 is past the vocab
    assert sample(logits, [biased, plain], [None, None], [None, None], [(), ()]) == [3, 0]
    draws = [
        sample(
            LOGITS[None].clone(),
            [SamplingParams(temperature=1.0, logit_bias=((4, 100.0),))],
            [torch.Generator().manual_seed(seed)],
            [None],
            [()],
        )[0]
        for seed in range(20)
    ]
    assert set(draws) == {4}


def test_logit_bias_is_checked() -> None:
    with pytest.raises(ValueError, match="logit_bias"):
        SamplingParams(logit_bias={5: 101.0})
    with pytest.raises(ValueError, match="logit_bias"):
        SamplingParams(logit_bias={-1: 1.0})
    assert SamplingParams(logit_bias={7: 2}).logit_bias == ((7, 2.0),)


def test_extreme_settings_still_sample_a_token() -> None:
    """Settings at the edge of float32 (a temperature or repetition penalty near 0, huge
    DRY) must give a token, not NaN probabilities that fail the whole step."""
    logits = torch.stack([LOGITS, LOGITS, LOGITS])
    seen = torch.ones(5, dtype=torch.bool)
    params = [
        SamplingParams(temperature=1e-300),
        SamplingParams(temperature=1.0, repetition_penalty=5e-324),
        SamplingParams(temperature=0.0, repetition_penalty=5e-324),
    ]
    gens = [torch.Generator().manual_seed(0) for _ in params]
    tokens = sample(logits, params, gens, [None, seen, seen], [(), (), ()])
    assert tokens[0] == 0  # the best token, as greedy
    assert all(0 <= t < 5 for t in tokens)
    # a row with no finite logit left falls back to the model's own logits
    everything = SamplingParams(temperature=1.0)
    banned = sample(LOGITS[None].clone(), [everything], [gens[0]], [None], [(0, 1, 2, 3, 4)])
    assert 0 <= banned[0] < 5


def test_greedy_rows_with_nan_inf_or_nothing_left_pick_as_the_finite_row_does() -> None:
    """Greedy takes argmax first and cleans the row only when the winner is not finite:
    NaN counts as -inf, +inf as the largest float (the first one wins), and a row with
    everything banned falls back to the model's logits."""
    nan, inf = float("nan"), float("inf")
    rows = torch.tensor(
        [
            [0.1, nan, 0.3, 0.2, 0.0],  # NaN would win a plain argmax
            [0.1, inf, 0.3, inf, 0.0],  # two +inf: the first
            [0.1, 0.2, 0.9, 0.3, 0.0],  # ordinary
        ]
    )
    params = [SamplingParams(temperature=0)] * 3
    assert sample(rows, params, [None] * 3, [None] * 3, [(4,)] * 3) == [2, 1, 2]
    assert sample(rows, params, [None] * 3, [None] * 3, [()] * 3) == [2, 1, 2]  # none banned
    assert sample(rows, params, [None] * 3, [None] * 3, [(2,)] * 3) == [3, 1, 3]  # the best
    everything = sample(rows[2:].clone(), params[:1], [None], [None], [(0, 1, 2, 3, 4)])
    assert everything == [2]  # nothing allowed left: the model's own best
