"""Prefix reuse: a prompt that starts like one the cache holds (a finished sequence kept in
the prefix store, or a live row) copies those keys and values instead of recomputing them,
and decodes exactly what a cold engine decodes."""

from __future__ import annotations

from collections.abc import Callable

from gen.engine import Engine, SamplingParams
from tests.fakes import ByteTokenizer, tiny_llama

MakeEngine = Callable[..., Engine]
tok = ByteTokenizer()
GREEDY = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
SHARED = "系统：你是一位严谨的技术作家。大纲：一、背景 🎉 二、方法 三、结果。"  # 90 bytes
QUESTIONS = ["请写第一节。", "请写第二节，谢谢！", "ขอบคุณ 🙏"]


def prompts() -> list[list[int]]:
    return [tok.encode(SHARED + q) for q in QUESTIONS]


def shared_len(a: list[int], b: list[int]) -> int:
    return next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)


def cold(model: object, prompt: list[int]) -> list[int]:
    engine = Engine(model, tok, prefix_cache_bytes=0)  # type: ignore[arg-type]
    return engine.generate([prompt], GREEDY)[0].token_ids


def test_a_later_prompt_copies_the_shared_prefix_of_a_finished_one() -> None:
    model = tiny_llama()
    engine = Engine(model, tok)
    first, second, _ = prompts()
    a = engine.generate([first], GREEDY)[0]
    assert a.cached_prompt_tokens == 0
    assert len(engine.runner.prefixes.entries) == 1  # kept after it finished
    b = engine.generate([second], GREEDY)[0]
    assert b.cached_prompt_tokens == shared_len(first, second) > len(SHARED.encode("utf-8"))
    assert b.prompt_tokens == len(second)
    assert b.token_ids == cold(model, second)
    assert a.token_ids == cold(model, first)


def test_requests_admitted_together_copy_from_the_first_ones_row() -> None:
    model = tiny_llama()
    engine = Engine(model, tok)
    first, second, third = prompts()
    done = engine.generate([first, second, third], GREEDY)
    # each copies from the longest match among the rows already filled
    expected = [
        0,
        shared_len(first, second),
        max(shared_len(first, third), shared_len(second, third)),
    ]
    assert [c.cached_prompt_tokens for c in done] == expected
    assert [c.token_ids for c in done] == [cold(model, p) for p in prompts()]


def test_the_same_prompt_again_runs_only_its_last_token() -> None:
    model = tiny_llama()
    engine = Engine(model, tok)
    prompt = prompts()[0]
    first = engine.generate([prompt], GREEDY)[0]
    again = engine.generate([prompt], GREEDY)[0]
    assert again.cached_prompt_tokens == len(prompt) - 1
    assert again.token_ids == first.token_ids


def test_a_conversation_continued_reuses_prompt_and_answer() -> None:
    """The stored entry holds the generated tokens too (a chat continuation resends them)."""
    model = tiny_llama()
    engine = Engine(model, tok)
    prompt = prompts()[0]
    answer = engine.generate([prompt], GREEDY)[0].token_ids
    follow_up = prompt + answer + tok.encode("继续")
    done = engine.generate([follow_up], GREEDY)[0]
    # every id fed through the model: the prompt and all answer tokens but the last
    assert done.cached_prompt_tokens == len(prompt) + len(answer) - 1
    assert done.token_ids == cold(model, follow_up)


def test_short_shared_prefixes_are_not_reused() -> None:
    engine = Engine(tiny_llama(), tok)
    engine.generate([tok.encode("短的前缀 A")], GREEDY)
    done = engine.generate([tok.encode("短的前缀 B")], GREEDY)[0]
    assert done.cached_prompt_tokens == 0  # 13 shared bytes, under min_tokens (16)


def test_prefix_reuse_off() -> None:
    engine = Engine(tiny_llama(), tok, prefix_cache_bytes=0)
    done = engine.generate(prompts(), GREEDY)
    assert [c.cached_prompt_tokens for c in done] == [0, 0, 0]
    assert not engine.runner.prefixes.entries


def test_least_recently_used_entries_leave_first() -> None:
    model = tiny_llama()
    probe = Engine(model, tok)
    per_token = probe.runner.cache.bytes_per_token()
    a, b, c = (tok.encode(ch * 40) for ch in "甲乙丙")  # 120 bytes each, no shared prefix
    # room for two finished sequences of 120 + 11 tokens, not three
    engine = Engine(model, tok, prefix_cache_bytes=2 * 131 * per_token + 1)
    for p in (a, b):
        engine.generate([p], GREEDY)
    engine.generate([a], GREEDY)  # touches a: b is now the oldest
    engine.generate([c], GREEDY)
    held = {key[0] for key in engine.runner.prefixes.entries}
    assert held == {a[0], c[0]}
    assert engine.runner.prefixes.nbytes <= engine.runner.prefixes.budget_bytes


def test_a_longer_entry_replaces_the_one_it_extends() -> None:
    engine = Engine(tiny_llama(), tok)
    prompt = prompts()[0]
    answer = engine.generate([prompt], GREEDY)[0].token_ids
    engine.generate([prompt + answer + tok.encode("继续写")], GREEDY)
    assert len(engine.runner.prefixes.entries) == 1
    (key,) = engine.runner.prefixes.entries
    assert list(key[: len(prompt)]) == prompt
