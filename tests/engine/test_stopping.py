"""Stop conditions with a scripted model: stop strings across tokens, held-back text, reasons."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gen.engine import Completion, Engine, SamplingParams
from tests.fakes import ByteTokenizer

MakeScripted = Callable[..., Engine]
EOS = ByteTokenizer.EOS


def greedy(**kwargs: Any) -> SamplingParams:
    return SamplingParams(temperature=0, **{"max_tokens": 64, **kwargs})


def run(engine: Engine, key: str, params: SamplingParams, prompt: str = " prompt") -> Completion:
    """Generate for the script keyed on `key` (the prompt's first character)."""
    tokenizer: Any = engine.tokenizer
    return engine.generate([tokenizer.encode(key + prompt)], params)[0]


def assert_streamed_cleanly(c: Completion, stop: str) -> None:
    """Every streamed prefix is a prefix of the final text and never shows the stop string."""
    shown = ""
    for delta in c.deltas:
        shown += delta
        assert c.text.startswith(shown)
        assert stop not in shown
    assert shown == c.text


# -- stop strings ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "stop", "before"),
    [
        (["Hello", " wo", "rld", "XY", "Z after"], "XYZ", "Hello world"),  # two tokens
        (["Hello", " wo", "rld", "X", "Y", "Z after"], "XYZ", "Hello world"),  # three
        (["Hello wo", "rldX", "Y", "Z", "after"], "XYZ", "Hello world"),  # mid-token start
        ("Hello worldXYZ after", "XYZ", "Hello world"),  # one byte per token
    ],
)
def test_stop_string_across_tokens_cuts_exactly(
    make_scripted_engine: MakeScripted, script: list[str] | str, stop: str, before: str
) -> None:
    engine = make_scripted_engine({"a": script})
    c = run(engine, "a", greedy(stop=(stop,)))
    assert c.text == before
    assert (c.finish_reason, c.stop_reason) == ("stop", stop)
    assert_streamed_cleanly(c, stop)
    # no delta shows any character of the stop string (none occur before it in the text)
    assert not any(ch in delta for delta in c.deltas for ch in stop)


def test_include_stop_str_in_output(make_scripted_engine: MakeScripted) -> None:
    engine = make_scripted_engine({"a": ["Hello", " wo", "rld", "XY", "Z after"]})
    c = run(engine, "a", greedy(stop=("XYZ",), include_stop_str_in_output=True))
    assert c.text == "Hello worldXYZ"
    assert (c.finish_reason, c.stop_reason) == ("stop", "XYZ")


@pytest.mark.parametrize("order", [1, -1])
def test_earliest_completing_stop_wins(make_scripted_engine: MakeScripted, order: int) -> None:
    # one token completes both: "abc" ends inside "c d", before "bc d" does
    engine = make_scripted_engine({"a": ["x ", "ab", "c d", "e"]})
    c = run(engine, "a", greedy(stop=("abc", "bc d")[::order]))
    assert (c.text, c.stop_reason) == ("x ", "abc")


@pytest.mark.parametrize("order", [1, -1])
def test_shorter_stop_completing_first_beats_one_started_earlier(
    make_scripted_engine: MakeScripted, order: int
) -> None:
    stops = ("a long stop", "long")[::order]
    for script in ("say a long stop now", ["say ", "a lo", "ng stop", " now"], ["say a long stop"]):
        engine = make_scripted_engine({"s": script})
        c = run(engine, "s", greedy(stop=stops))
        assert (c.text, c.stop_reason) == ("say a ", "long"), script


def test_stops_completing_at_the_same_place_cut_at_the_earlier_start(
    make_scripted_engine: MakeScripted,
) -> None:
    engine = make_scripted_engine({"a": ["go", " st", "op", " more"]})
    c = run(engine, "a", greedy(stop=("op", "stop")))
    assert (c.text, c.stop_reason) == ("go ", "stop")
    c = run(engine, "a", greedy(stop=("op", "stop"), include_stop_str_in_output=True))
    assert (c.text, c.stop_reason) == ("go stop", "stop")


def test_partial_match_that_does_not_complete_is_released_intact(
    make_scripted_engine: MakeScripted,
) -> None:
    engine = make_scripted_engine({"a": ["one ", "X", "Y", "!", " two ", "XY", "Z"]})
    c = run(engine, "a", greedy(stop=("XYZ",)))
    assert c.text == "one XY! two "
    # "X" and "Y" were held back, then shown together with "!"
    assert c.deltas[:4] == ["one ", "", "", "XY!"]
    assert_streamed_cleanly(c, "XYZ")


def test_partial_match_held_at_the_end_is_released(make_scripted_engine: MakeScripted) -> None:
    engine = make_scripted_engine({"a": ["done ", "XY"], "b": ["cut ", "XY", "more"]})
    c = run(engine, "a", greedy(stop=("XYZ",)))  # EOS after "XY"
    assert (c.text, c.finish_reason, c.stop_reason) == ("done XY", "stop", None)
    assert c.deltas[-1] == "XY"
    c = run(engine, "b", greedy(stop=("XYZ",), max_tokens=2))  # max_tokens after "XY"
    assert (c.text, c.finish_reason) == ("cut XY", "length")


@pytest.mark.parametrize(
    ("script", "stop", "before"),
    [
        ("你好。再见。", "。", "你好"),  # a 3-byte character, one byte per token
        ("停下🛑好的", "🛑", "停下"),  # a 4-byte emoji, one byte per token
        ("ok 🛑!", "🛑!", "ok "),
        (["好", "的", "。", "再"], "的。", "好"),  # one character per token
    ],
)
def test_multibyte_stop_strings(
    make_scripted_engine: MakeScripted, script: str | list[str], stop: str, before: str
) -> None:
    engine = make_scripted_engine({"a": script})
    c = run(engine, "a", greedy(stop=(stop,)))
    assert (c.text, c.stop_reason) == (before, stop)
    assert_streamed_cleanly(c, stop)
    assert not any("\ufffd" in d for d in c.deltas)


# -- finish reasons ----------------------------------------------------------------------


def test_eos_finishes_with_stop_and_no_reason(make_scripted_engine: MakeScripted) -> None:
    engine = make_scripted_engine({"a": "hello"})
    c = run(engine, "a", greedy())
    assert (c.text, c.finish_reason, c.stop_reason) == ("hello", "stop", None)
    assert c.token_ids == list(b"hello")  # the EOS is not part of the output ids
    assert c.completion_tokens == 6  # but it was sampled


def test_stop_token_id(make_scripted_engine: MakeScripted) -> None:
    engine = make_scripted_engine({"a": "hello#world"})
    c = run(engine, "a", greedy(stop_token_ids=(ord("#"),)))
    assert (c.text, c.finish_reason, c.stop_reason) == ("hello", "stop", ord("#"))
    assert c.token_ids == list(b"hello")


def test_stop_string_reason_and_ids(make_scripted_engine: MakeScripted) -> None:
    engine = make_scripted_engine({"a": ["hello", " END", " more"]})
    c = run(engine, "a", greedy(stop=("END",)))
    assert (c.text, c.finish_reason, c.stop_reason) == ("hello ", "stop", "END")
    assert len(c.token_ids) == 2  # the token that completed the stop string counts


def test_max_tokens(make_scripted_engine: MakeScripted) -> None:
    engine = make_scripted_engine({"a": "hello world"})
    c = run(engine, "a", greedy(max_tokens=5))
    assert (c.text, c.finish_reason, c.stop_reason) == ("hello", "length", None)
    assert c.completion_tokens == 5 and len(c.token_ids) == 5


def test_context_window(make_scripted_engine: MakeScripted) -> None:
    engine = make_scripted_engine({"a": "x" * 100}, max_model_len=12)
    c = run(engine, "a", greedy(max_tokens=50), prompt="bcd")  # 4 prompt tokens
    assert (c.finish_reason, c.stop_reason) == ("length", None)
    assert c.prompt_tokens + c.completion_tokens == 12
    assert c.text == "x" * 8


def test_stream_reports_counts_on_the_final_output(make_scripted_engine: MakeScripted) -> None:
    engine = make_scripted_engine({"a": "hey"})
    outs = list(engine.stream(engine.tokenizer.encode("a b"), greedy()))  # type: ignore[attr-defined]
    assert [o.finished for o in outs] == [False, False, False, True]
    last = outs[-1]
    assert (last.finish_reason, last.prompt_tokens, last.completion_tokens) == ("stop", 3, 4)
    assert "".join(o.text for o in outs) == "hey"


# -- min_tokens and ignore_eos -----------------------------------------------------------


def test_min_tokens_suppresses_eos(make_scripted_engine: MakeScripted) -> None:
    engine = make_scripted_engine({"a": "ab"})  # then EOS, banned until min_tokens
    c = run(engine, "a", greedy(min_tokens=5))
    assert (c.text, c.finish_reason) == ("ab___", "stop")  # "_" is the model's second choice
    assert c.completion_tokens == 6


def test_min_tokens_suppresses_stop_token_ids(make_scripted_engine: MakeScripted) -> None:
    engine = make_scripted_engine({"a": "a#b#c"})
    c = run(engine, "a", greedy(min_tokens=3, stop_token_ids=(ord("#"),)))
    assert (c.text, c.stop_reason) == ("a_b", ord("#"))


def test_min_tokens_suppresses_stop_strings(make_scripted_engine: MakeScripted) -> None:
    engine = make_scripted_engine({"a": "ab cd ab ef"})
    c = run(engine, "a", greedy(min_tokens=4, stop=("ab",)))
    assert (c.text, c.stop_reason) == ("ab cd ", "ab")
    # a stop string completing at exactly min_tokens counts
    c = run(engine, "a", greedy(min_tokens=2, stop=("ab",)))
    assert (c.text, c.stop_reason) == ("", "ab")


def test_ignore_eos_runs_to_max_tokens(make_scripted_engine: MakeScripted) -> None:
    engine = make_scripted_engine({"a": "ab"})
    c = run(engine, "a", greedy(ignore_eos=True, max_tokens=6))
    assert (c.text, c.finish_reason, c.stop_reason) == ("ab", "length", None)
    assert c.token_ids == [ord("a"), ord("b"), EOS, EOS, EOS, EOS]
    c = run(engine, "a", greedy(ignore_eos=True, max_tokens=4, skip_special_tokens=False))
    assert c.text == "ab<eos><eos>"


def test_ignore_eos_keeps_stop_token_ids(make_scripted_engine: MakeScripted) -> None:
    engine = make_scripted_engine({"a": "ab#c"})
    c = run(engine, "a", greedy(ignore_eos=True, stop_token_ids=(ord("#"),)))
    assert (c.text, c.stop_reason) == ("ab", ord("#"))


# -- several scripted requests at once ---------------------------------------------------


def test_batched_scripted_requests_keep_their_own_scripts(
    make_scripted_engine: MakeScripted,
) -> None:
    scripts = {"a": "first reply", "b": "two", "c": "third one here", "d": "4"}
    engine = make_scripted_engine(scripts, max_slots=2)
    tokenizer: Any = engine.tokenizer
    prompts = [tokenizer.encode(k + " prompt" * (i + 1)) for i, k in enumerate(scripts)]
    done = engine.generate(prompts, greedy())
    assert [c.text for c in done] == list(scripts.values())
    assert engine.runner.slots.used == 0
