"""Anti-repetition penalties: exact amounts on hand-made logits, the incremental state
against slow reference implementations, and the engine with a model that loops."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pytest
import torch

from gen.engine import Completion, Engine, SamplingParams
from gen.engine.kv_cache import KVCache
from gen.engine.penalties import PenaltyState, SequenceBreakers, WordParts
from gen.engine.sampler import sample
from gen.engine.sequence import Sequence as Seq
from tests.fakes import ByteTokenizer, CountingTokenizer, RowModel, tiny_config

MakeEngine = Callable[..., Engine]
INF = float("-inf")


def state(
    ids: Sequence[int], vocab: int = 10, breakers: frozenset[int] = frozenset(), **kw: Any
) -> PenaltyState:
    """A PenaltyState for SamplingParams(**kw) after the generated `ids`."""
    s = PenaltyState(SamplingParams(**kw), vocab, breakers)
    for t in ids:
        s.push(t)
    return s


# --- frequency and presence -------------------------------------------------------------


def test_frequency_and_presence_subtract_exactly_per_count() -> None:
    s = state([1, 2, 1, 1, 4], vocab=6, frequency_penalty=0.5, presence_penalty=0.25)
    out = s.apply(torch.zeros(6))
    assert out.tolist() == [0.0, -1.75, -0.75, 0.0, -0.75, 0.0]
    assert s.counts == {1: 3, 2: 1, 4: 1}


def test_negative_frequency_and_presence_reward_seen_ids() -> None:
    row = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert state([3, 3], vocab=4, frequency_penalty=-1.5).apply(row).tolist() == [1, 2, 3, 7]
    assert state([0, 0], vocab=4, presence_penalty=-2.0).apply(row).tolist() == [3, 2, 3, 4]


def test_apply_leaves_its_input_alone() -> None:
    row = torch.zeros(4)
    state([1, 2, 1, 2, 1], vocab=4, frequency_penalty=1.0, no_repeat_ngram_size=2).apply(row)
    assert row.tolist() == [0.0, 0.0, 0.0, 0.0]


# --- no-repeat n-gram -------------------------------------------------------------------


def banned(out: torch.Tensor) -> list[int]:
    return torch.isinf(out).nonzero().flatten().tolist()


def test_no_repeat_ngram_bans_exactly_the_completions_of_a_seen_ngram() -> None:
    row = torch.arange(10.0)
    # 3-grams seen: (1,2,3) (2,3,1) (3,1,2) (1,2,4) (2,4,1) (4,1,2); the tail (1,2)
    s = state([1, 2, 3, 1, 2, 4, 1, 2], no_repeat_ngram_size=3)
    out = s.apply(row)
    assert banned(out) == [3, 4]
    assert torch.equal(out[[0, 1, 2, 5, 6, 7, 8, 9]], row[[0, 1, 2, 5, 6, 7, 8, 9]])
    s.push(5)  # tail (2,5) was never seen: nothing banned
    assert banned(s.apply(row)) == []
    assert banned(state([5, 6, 5], no_repeat_ngram_size=2).apply(row)) == [6]
    assert banned(state([5, 6], no_repeat_ngram_size=3).apply(row)) == []  # no 3-gram yet


# --- DRY --------------------------------------------------------------------------------

DRY: dict[str, Any] = {"dry_multiplier": 0.5, "dry_base": 2.0, "dry_allowed_length": 2}


def test_dry_penalises_the_id_that_extends_a_repeat_by_multiplier_times_base_power() -> None:
    row = torch.zeros(10)
    # ... 1 2 | 3 ... 1 2: 3 would extend a repeat of L=2 -> 0.5 * 2**0
    out = state([1, 2, 3, 7, 1, 2], **DRY).apply(row)
    assert out.tolist() == [0, 0, 0, -0.5, 0, 0, 0, 0, 0, 0]
    # L=4 (1 2 3 4 | 5 ... 1 2 3 4) -> 0.5 * 2**2 = 2
    s = state([1, 2, 3, 4, 5, 8, 1, 2, 3, 4], **DRY)
    assert s.dry_lengths() == {5: 4}
    assert s.apply(row).tolist() == [0, 0, 0, 0, 0, -2.0, 0, 0, 0, 0]
    # a repeat of 1 < allowed_length: nothing
    assert state([1, 2, 7, 1], **DRY).apply(row).tolist() == [0.0] * 10


def test_dry_takes_the_longest_repeat_per_id_and_every_id_that_extends_one() -> None:
    # 3 4 | 5 (L=2), 2 3 4 | 6 (L=3), then ... 2 3 4: 5 gets L=2, 6 gets L=3
    s = state([3, 4, 5, 2, 3, 4, 6, 9, 2, 3, 4], **DRY)
    assert s.dry_lengths() == {5: 2, 6: 3}
    assert s.dry_penalties() == {5: 0.5, 6: 1.0}


def test_dry_no_penalty_when_the_match_crosses_a_breaker() -> None:
    row = torch.zeros(10)
    # 1 2 9 3 | 5 ... 1 2 9 3: the run holds breaker 9, so only "3" matches (L=1)
    s = state([1, 2, 9, 3, 5, 6, 1, 2, 9, 3], breakers=frozenset({9}), **DRY)
    assert s.dry_lengths() == {}
    assert s.apply(row).tolist() == [0.0] * 10
    # without the breaker the same history penalises 5 (L=4)
    assert state([1, 2, 9, 3, 5, 6, 1, 2, 9, 3], **DRY).dry_lengths() == {5: 4}
    # a breaker itself is never penalised (as in llama.cpp): 1 2 | 9 ... 1 2
    assert state([1, 2, 9, 5, 1, 2], breakers=frozenset({9}), **DRY).dry_lengths() == {}


def test_dry_penalty_last_n_searches_only_the_window() -> None:
    ids = [1, 2, 3, 7, 7, 7, 1, 2]
    assert state(ids, **DRY).dry_lengths() == {3: 2}
    assert state(ids, dry_penalty_last_n=8, **DRY).dry_lengths() == {3: 2}
    assert state(ids, dry_penalty_last_n=7, **DRY).dry_lengths() == {}  # the first 1 left


def test_dry_exponent_is_capped_so_the_penalty_stays_finite() -> None:
    s = state([1] * 400, vocab=4, dry_multiplier=0.5, dry_base=2.0)
    assert s.dry_lengths() == {1: 399}
    assert s.dry_penalties()[1] == 0.5 * 2.0**s.max_exponent
    assert torch.isfinite(s.apply(torch.zeros(4))).all()


def test_dry_leaves_alone_an_id_that_goes_on_with_a_word_already_begun() -> None:
    """After " l ighth ouses" and then " l ighth", "ouses" would extend a repeat of 2, but
    it only finishes the word; the penalty falls on the next word's start instead."""
    parts = WordParts(starts=frozenset({2, 3, 4}), ends=frozenset({1, 2, 3}))
    history = [1, 2, 3, 5, 6, 1, 2]  # " l" "ighth" "ouses" " is" " tall" " l" "ighth"
    s = PenaltyState(SamplingParams(**DRY), 10, frozenset(), parts)
    for t in history:
        s.push(t)
    assert s.dry_lengths() == {}
    assert state(history, **DRY).dry_lengths() == {3: 2}  # llama.cpp's rule penalises it
    s.push(3)  # the word is done: " is" (not a word part) would extend a repeat of 3
    assert s.dry_lengths() == {5: 3}
    assert s.apply(torch.zeros(10)).tolist() == [0, 0, 0, 0, 0, -1.0, 0, 0, 0, 0]
    # after an id that does not end inside a word, a word part is penalised as before
    s.push(6)
    s.push(1)
    s.push(2)
    s.push(3)
    s.push(5)  # " is" is not in `ends` here, so what may follow it is judged as usual
    assert s.dry_lengths() == {6: 4}


def test_word_parts_are_the_ids_spaced_scripts_continue_words_with() -> None:
    inner = ByteTokenizer(["ighth", " l", "ouses.", "猫", "ประภาคาร", "Ελ", "🎉"])
    breakers = SequenceBreakers(inner, inner.vocab_size)
    parts = breakers.word_parts()
    w = inner.first_word
    letters = {ord(c) for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"}
    assert parts.starts == letters | {w, w + 2, w + 5}  # "猫", Thai, " l", emoji, digits: no
    assert parts.ends == letters | {w, w + 1, w + 5}  # "ouses." ends with a full stop
    assert breakers.word_parts() is parts


def dry_reference(ids: list[int], allowed: int, breakers: set[int], last_n: int) -> dict[int, int]:
    """The rule, from scratch: for each earlier occurrence j of a candidate t, the longest
    L with ids[j-L:j] == ids[n-L:n], inside the window and holding no breaker."""
    n = len(ids)
    start = max(0, n - last_n) if last_n else 0
    out: dict[int, int] = {}
    for j in range(start + 1, n):
        t = ids[j]
        if t in breakers:
            continue
        length = 0
        while (
            j - 1 - length >= start
            and ids[j - 1 - length] == ids[n - 1 - length]
            and ids[n - 1 - length] not in breakers
        ):
            length += 1
        if length >= allowed and length > out.get(t, 0):
            out[t] = length
    return out


def ngram_reference(ids: list[int], size: int) -> set[int]:
    k = size - 1
    if len(ids) < k:
        return set()
    tail = ids[len(ids) - k :]
    return {ids[i + k] for i in range(len(ids) - k) if ids[i : i + k] == tail}


@pytest.mark.parametrize(
    ("vocab", "allowed", "last_n", "ngram"),
    [(3, 1, 0, 2), (5, 2, 0, 3), (5, 2, 17, 4), (4, 3, 40, 2), (8, 2, 5, 5)],
)
def test_incremental_state_equals_a_brute_force_reference(
    vocab: int, allowed: int, last_n: int, ngram: int
) -> None:
    rng = random.Random(vocab * 1000 + allowed * 100 + last_n)
    breakers = {vocab - 1}
    longest = 0
    for _ in range(4):
        s = PenaltyState(
            SamplingParams(
                frequency_penalty=0.5,
                presence_penalty=0.25,
                no_repeat_ngram_size=ngram,
                dry_multiplier=1.0,
                dry_allowed_length=allowed,
                dry_penalty_last_n=last_n,
            ),
            vocab,
            frozenset(breakers),
        )
        ids: list[int] = []
        for _ in range(300):
            # mostly repeats of earlier stretches, so long matches occur
            if ids and rng.random() < 0.7:
                back = rng.randint(1, min(6, len(ids)))  # continue a period-`back` cycle
                t = ids[rng.randrange(len(ids))] if rng.random() < 0.2 else ids[-back]
            else:
                t = rng.randrange(vocab)
            s.push(t)
            ids.append(t)
            reference = dry_reference(ids, allowed, breakers, last_n)
            assert s.dry_lengths() == reference, ids
            longest = max(longest, *reference.values(), 0)
            assert set(s.banned_ids()) == ngram_reference(ids, ngram)
            expected = torch.tensor([0.5 * ids.count(v) + 0.25 * (v in ids) for v in range(vocab)])
            assert s.bias is not None and torch.equal(s.bias, expected)
    assert longest >= min(last_n or 8, 8) - 1  # long repeats were tested, not just short ones


# --- SamplingParams and breakers --------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("frequency_penalty", 2.5),
        ("frequency_penalty", -2.1),
        ("presence_penalty", 3.0),
        ("no_repeat_ngram_size", 1),
        ("no_repeat_ngram_size", -2),
        ("dry_multiplier", -0.5),
        ("dry_base", 1.0),
        ("dry_allowed_length", 0),
        ("dry_penalty_last_n", -1),
    ],
)
def test_penalty_params_validation(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=rf"{field}.*{re.escape(str(value))}"):
        SamplingParams(**{field: value})  # type: ignore[arg-type]


def test_penalty_params_defaults_and_breakers() -> None:
    p = SamplingParams()
    assert not p.has_penalties
    assert p.dry_sequence_breakers == ("\n", ":", '"', "*")
    assert SamplingParams(dry_sequence_breakers=["。"]).dry_sequence_breakers == ("。",)  # type: ignore[arg-type]
    assert SamplingParams(no_repeat_ngram_size=2).has_penalties
    with pytest.raises(ValueError, match="empty"):
        SamplingParams(dry_sequence_breakers=("\n", ""))


def test_breaker_ids_are_the_tokens_whose_text_holds_a_breaker_decoded_once() -> None:
    inner = ByteTokenizer(["好\n", "🎉", "a:b", "猫"])
    tok = CountingTokenizer(inner)
    breakers = SequenceBreakers(tok, inner.vocab_size)
    assert tok.calls == 0  # nothing decoded until a request uses DRY
    ids = breakers.ids(("\n", ":", '"', "*"))
    word = inner.first_word
    assert ids == {ord("\n"), ord(":"), ord('"'), ord("*"), word, word + 2}
    assert tok.calls == inner.vocab_size
    assert breakers.ids(("猫",)) == {word + 3}
    assert breakers.ids(("\n", ":", '"', "*")) is ids
    assert tok.calls == inner.vocab_size  # the vocabulary was decoded once


# --- the sampler and Sequence -----------------------------------------------------------


def test_sampler_applies_penalties_per_row_and_keeps_plain_rows_on_the_argmax() -> None:
    logits = torch.tensor([[0.0, 3.0, 2.9, 1.0], [0.0, 3.0, 2.9, 1.0]])
    p = SamplingParams(temperature=0, presence_penalty=0.5)
    s = state([1], vocab=4, presence_penalty=0.5)
    assert sample(logits, [p, p], [None, None], [None, None], [(), ()], [s, None]) == [2, 1]
    plain = SamplingParams(temperature=0)
    assert sample(logits, [plain, plain], [None, None], [None, None], [(), ()], [None, None]) == [
        1,
        1,
    ]


def test_sequence_counts_generated_ids_only_over_every_round() -> None:
    tok = ByteTokenizer()
    params = SamplingParams(temperature=0, max_tokens=3, frequency_penalty=1.0)
    seq = Seq(tok.encode("aaaa"), params, tok, (tok.EOS,), hold=True)
    breakers = SequenceBreakers(tok, tok.vocab_size)
    for t in tok.encode("bc"):
        seq.append(t, 512)
    s = seq.penalty_state(tok.vocab_size, breakers)  # made late: replays what came before
    assert s is not None and s.ids == tok.encode("bc")
    assert seq.append(ord("b"), 512).parked
    seq.resume(3)
    seq.append(ord("d"), 512)
    assert seq.penalty_state(tok.vocab_size, breakers) is s
    assert s.counts == {ord("b"): 2, ord("c"): 1, ord("d"): 1}  # no "a": that is the prompt
    off = Seq(tok.encode("a"), SamplingParams(temperature=0), tok, (tok.EOS,))
    assert off.penalty_state(tok.vocab_size, breakers) is None  # the sampler's fast path


def test_dry_sees_the_prompt_and_the_other_penalties_do_not() -> None:
    """A round that re-sends earlier text in its prompt must not loop back into it."""
    tok = ByteTokenizer()
    params = SamplingParams(
        temperature=0, dry_multiplier=0.5, dry_base=2.0, frequency_penalty=1.0,
        no_repeat_ngram_size=2,
    )  # fmt: skip
    seq = Seq(tok.encode("猫!%?"), params, tok, (tok.EOS,))
    breakers = SequenceBreakers(tok, tok.vocab_size)
    seq.append(ord("!"), 512)
    s = seq.penalty_state(tok.vocab_size, breakers)
    assert s is not None
    assert s.dry_lengths() == {}  # "!" alone: L=1 < allowed_length 2
    seq.append(ord("%"), 512)  # "! %" repeats the prompt's, which "?" followed
    assert s.dry_lengths() == {ord("?"): 2}
    assert s.dry_penalties() == {ord("?"): 0.5}
    assert s.counts == {ord("!"): 1, ord("%"): 1}  # the prompt's ids are not counted
    assert s.banned_ids() == frozenset()  # "% ?" is the prompt's 2-gram, not a generated one
    seq.append(ord("~"), 512)
    seq.append(ord("%"), 512)  # generated "% ~" before: after this "%", "~" is banned
    assert s.banned_ids() == {ord("~")}


# --- the engine -------------------------------------------------------------------------

WORDS = [*"春夏秋冬山水风月", "🎉", "🐱"]


class LoopModel(RowModel):
    """Prefers, after word k, word k+1, then k+2, ... (wrapping): greedy decoding cycles
    through WORDS for ever. Logits depend on the last input id only, so a penalty that
    steers away from the cycle changes what comes next."""

    def __init__(self, tokenizer: ByteTokenizer) -> None:
        self.first = tokenizer.first_word
        self.cfg = tiny_config(tokenizer.vocab_size)

    def __call__(
        self, input_ids: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor, cache: KVCache
    ) -> torch.Tensor:
        n = len(WORDS)
        last = (input_ids[:, -1] - self.first).clamp(0, n - 1)  # (B,)
        ranks = (torch.arange(n)[None, :] - last[:, None] - 1) % n  # (B, n) 0 = favourite
        logits = torch.zeros(input_ids.shape[0], self.cfg.vocab_size)  # (B, vocab)
        logits[:, self.first : self.first + n] = 10.0 - 0.25 * ranks
        return logits


@pytest.fixture
def loop_engine() -> Engine:
    tok = ByteTokenizer(WORDS)
    return Engine(LoopModel(tok), tok, max_slots=4)


def loop_prompt(engine: Engine) -> list[int]:
    tok = engine.tokenizer
    assert isinstance(tok, ByteTokenizer)
    return [*tok.encode("写："), tok.ids(["春"])[0]]


def repeated_ngrams(ids: list[int], n: int) -> int:
    grams = [tuple(ids[i : i + n]) for i in range(len(ids) - n + 1)]
    return len(grams) - len(set(grams))


@pytest.mark.parametrize(
    "penalty",
    [{"dry_multiplier": 20.0}, {"no_repeat_ngram_size": 3}],
    ids=["dry", "no_repeat_ngram"],
)
def test_a_looping_greedy_request_breaks_its_loop(
    loop_engine: Engine, penalty: dict[str, Any]
) -> None:
    prompt = loop_prompt(loop_engine)
    base = {"temperature": 0, "max_tokens": 60, "ignore_eos": True}
    plain, penalised = loop_engine.generate(
        [prompt, prompt], [SamplingParams(**base), SamplingParams(**base, **penalty)]
    )
    assert plain.text.startswith("夏秋冬山水风月🎉🐱春夏秋冬")  # the cycle, round and round
    assert repeated_ngrams(plain.token_ids, 3) > 40
    assert penalised.token_ids[:10] == plain.token_ids[:10]  # the first lap is no repeat
    assert penalised.token_ids != plain.token_ids
    assert repeated_ngrams(penalised.token_ids, 3) == 0  # no 3 words ever again in a row
    assert len(penalised.token_ids) == 60
    tok = loop_engine.tokenizer
    for c in (plain, penalised):
        assert c.text == tok.decode(c.token_ids, skip_special_tokens=True)
        assert "".join(c.deltas) == c.text and "\ufffd" not in c.text


def test_penalties_last_across_parked_rounds(loop_engine: Engine) -> None:
    """Two held rounds of 15 give the tokens of one round of 30: the state carries over."""
    prompt = loop_prompt(loop_engine)
    params = SamplingParams(temperature=0, max_tokens=30, ignore_eos=True, dry_multiplier=20.0)
    whole = loop_engine.generate([prompt], params)[0].token_ids
    rid = loop_engine.add_request(prompt, replace(params, max_tokens=15), hold=True)
    rounds: list[int] = []
    for n in (None, 15):
        if n is not None:
            loop_engine.resume(rid, n)
        parked = False
        while not parked:
            for out in loop_engine.step():
                rounds += out.token_ids
                parked = parked or out.parked
    loop_engine.release(rid)
    assert rounds == whole
    assert repeated_ngrams(whole, 3) == 0


PENALTIES: dict[str, Any] = {
    "frequency_penalty": 0.4,
    "presence_penalty": 0.3,
    "no_repeat_ngram_size": 3,
    "dry_multiplier": 0.8,
    "dry_penalty_last_n": 64,
}


def test_same_seed_same_text_alone_or_batched_with_penalties(make_engine: MakeEngine) -> None:
    engine = make_engine()
    tok = ByteTokenizer()
    prompts = [tok.encode(p) for p in ("你好，世界 🎉", "Hello", "The quick brown fox")]
    seeded = SamplingParams(temperature=0.9, seed=7, max_tokens=40, ignore_eos=True, **PENALTIES)
    greedy = SamplingParams(temperature=0, max_tokens=40, ignore_eos=True, **PENALTIES)
    alone = [engine.generate([prompts[0]], p)[0] for p in (seeded, greedy)]
    assert engine.generate([prompts[0]], seeded)[0].token_ids == alone[0].token_ids
    neighbours = [
        SamplingParams(temperature=0.9, seed=1, max_tokens=25, dry_multiplier=2.0),
        SamplingParams(temperature=0, max_tokens=40, ignore_eos=True),
    ]
    batch = engine.generate(
        [prompts[1], prompts[0], prompts[2], prompts[0]],
        [neighbours[0], seeded, neighbours[1], greedy],
    )
    assert [batch[1].token_ids, batch[3].token_ids] == [c.token_ids for c in alone]
    assert batch[1].text == alone[0].text
    assert alone[0].text == tok.decode(alone[0].token_ids, skip_special_tokens=True)
    other_seed = replace(seeded, seed=8)
    assert engine.generate([prompts[0]], other_seed)[0].token_ids != alone[0].token_ids


def test_penalties_off_leave_outputs_unchanged(make_engine: MakeEngine) -> None:
    engine = make_engine()
    tok = ByteTokenizer()
    prompts = [tok.encode(p) for p in ("你好，世界 🎉", "Hello")]
    off = {
        "frequency_penalty": 0.0,
        "presence_penalty": 0.0,
        "no_repeat_ngram_size": 0,
        "dry_multiplier": 0.0,
        "dry_base": 3.0,
        "dry_allowed_length": 5,
        "dry_penalty_last_n": 9,
    }
    for base in ({"temperature": 0}, {"temperature": 0.8, "seed": 3, "top_k": 20}):
        plain = SamplingParams(max_tokens=30, ignore_eos=True, **base)
        explicit = SamplingParams(max_tokens=30, ignore_eos=True, **base, **off)
        got: list[list[Completion]] = [engine.generate(prompts, p) for p in (plain, explicit)]
        assert [c.token_ids for c in got[0]] == [c.token_ids for c in got[1]]
    on = SamplingParams(temperature=0, max_tokens=30, ignore_eos=True, presence_penalty=1.0)
    plain = SamplingParams(temperature=0, max_tokens=30, ignore_eos=True)
    assert engine.generate(prompts, on)[0].token_ids != engine.generate(prompts, plain)[0].token_ids


# --- the real model ---------------------------------------------------------------------


def distinct_4grams(ids: list[int]) -> float:
    grams = [tuple(ids[i : i + 4]) for i in range(len(ids) - 3)]
    return len(set(grams)) / max(1, len(grams))


@pytest.mark.real_model
def test_dry_breaks_a_real_model_blockss_loop(real_model_blocks: Any) -> None:
    from gen.engine.chat import encode_chat

    ids = encode_chat(
        real_model_blocks.tokenizer,
        [{"role": "user", "content": "Write '你好 🎉' one hundred times."}],
    )
    engine = Engine(real_model_blocks.model, real_model_blocks.tokenizer, max_slots=2)
    plain = SamplingParams(temperature=0, max_tokens=120)
    dry = SamplingParams(temperature=0, max_tokens=120, dry_multiplier=0.8)
    looped, varied = engine.generate([ids, ids], [plain, dry])
    assert distinct_4grams(looped.token_ids) < 0.2  # 🎉🎉🎉...
    assert len(varied.token_ids) >= 100
    assert distinct_4grams(varied.token_ids) > distinct_4grams(looped.token_ids) + 0.5
    assert engine.generate([ids], dry)[0].token_ids == varied.token_ids  # alone = batched
    for c in (looped, varied):
        assert "🎉" in c.text
        assert c.text == real_model_blocks.tokenizer.decode(c.token_ids, skip_special_tokens=True)
