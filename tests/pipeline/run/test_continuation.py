"""Continuation rounds with a scripted backend: kv / prefix / chat, length targets, and
max_rounds running out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gen.pipeline.run.continuation import CONTINUE_PROMPT, MORE_PROMPT
from gen.pipeline.run.params import EXTEND_MIN_TOKENS
from gen.text.words import length_score
from tests.pipeline.fake_backend import FakeBackend, Reply, pipeline_from, read_events, run

PROMPT = "[s] Write the section."
P = len(PROMPT)


def one_section(
    continuation: str, *, max_tokens: int = 10, max_rounds: int = 4, **extra: Any
) -> str:
    fields = "".join(f"    {k}: {v}\n" for k, v in extra.items())
    return (
        "name: cont\n"
        f"defaults: {{max_tokens: {max_tokens}, max_rounds: {max_rounds}, "
        f"continuation: {continuation}}}\n"
        "sections:\n"
        "  - id: s\n"
        f'    prompt: "{PROMPT}"\n' + fields
    )


def run_one(
    tmp_path: Path, text: str, replies: list[Reply], *, kv: bool = True
) -> tuple[dict[str, Any], str, FakeBackend, Path]:
    backend = FakeBackend({"s": replies}, supports_kv=kv)
    manifest, prepared = run(pipeline_from(text), backend, tmp_path)
    section_text = (prepared.run_dir.sections_dir / "s.md").read_text("utf-8")
    return manifest, section_text, backend, prepared.run_dir.path


def rounds_of(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    rounds: list[dict[str, Any]] = manifest["sections"][0]["rounds"]
    return rounds


def test_kv_resumes_the_same_stream(tmp_path: Path) -> None:
    replies: list[Reply] = [("Hello ", "length"), ("brave new ", "length"), ("world.", "stop")]
    manifest, text, backend, _ = run_one(tmp_path, one_section("kv"), replies)
    assert text == "Hello brave new world."
    (call,) = backend.calls  # one request; later rounds resume it
    assert call.hold is True and call.continue_final is False
    assert call.params.max_tokens == 10
    assert backend.resumes == [("s", 10), ("s", 10)]
    rounds = rounds_of(manifest)
    assert [r["finish_reason"] for r in rounds] == ["length", "length", "stop"]
    assert [r["strategy"] for r in rounds] == ["initial", "kv", "kv"]
    assert [r["prompt_tokens"] for r in rounds] == [P, P + 6, P + 16]
    assert [r["cached_prompt_tokens"] for r in rounds] == [0, P + 6, P + 16]
    assert [r["completion_tokens"] for r in rounds] == [6, 10, 6]
    assert manifest["sections"][0]["truncated"] is False


def test_kv_without_backend_support_falls_back_to_chat(tmp_path: Path) -> None:
    replies: list[Reply] = [("Hello brave ", "length"), ("new world.", "stop")]
    manifest, text, backend, _ = run_one(tmp_path, one_section("kv"), replies, kv=False)
    assert text == "Hello brave new world."
    assert backend.resumes == []
    assert [c.hold for c in backend.calls] == [False, False]
    assert backend.calls[1].messages[-1] == {"role": "user", "content": CONTINUE_PROMPT}
    assert [r["strategy"] for r in rounds_of(manifest)] == ["initial", "chat"]


def test_prefix_sends_the_partial_answer_as_assistant_prefix(tmp_path: Path) -> None:
    replies: list[Reply] = [("Once upon a time", "length"), (" there was a dragon.", "stop")]
    manifest, text, backend, _ = run_one(tmp_path, one_section("prefix"), replies)
    assert text == "Once upon a time there was a dragon."
    first, second = backend.calls
    assert (first.continue_final, second.continue_final) == (False, True)
    assert (first.hold, second.hold) == (False, False)
    assert second.messages == [
        *first.messages,
        {"role": "assistant", "content": "Once upon a time"},
    ]
    assert backend.resumes == []
    rounds = rounds_of(manifest)
    assert [r["strategy"] for r in rounds] == ["initial", "prefix"]
    assert [r["prompt_tokens"] for r in rounds] == [P, P + len("Once upon a time")]


@pytest.mark.parametrize(
    ("second", "added"),
    [
        # the model repeats the last words, then goes on
        ("fox jumps over the lazy dog.", " the lazy dog."),
        # the model starts the whole text again
        ("The quick brown fox jumps over the lazy dog.", " the lazy dog."),
        ("\n\nThe quick brown fox jumps over the lazy dog.", " the lazy dog."),
        # no repeat at all
        (" the lazy dog.", " the lazy dog."),
    ],
)
def test_chat_sends_a_continue_turn_and_removes_overlap(
    tmp_path: Path, second: str, added: str
) -> None:
    first = "The quick brown fox jumps over"
    manifest, text, backend, run_dir = run_one(
        tmp_path, one_section("chat"), [(first, "length"), (second, "stop")]
    )
    assert text == first + added
    call1, call2 = backend.calls
    assert call2.messages == [
        *call1.messages,
        {"role": "assistant", "content": first},
        {"role": "user", "content": CONTINUE_PROMPT},
    ]
    assert call2.continue_final is False
    assert [r["strategy"] for r in rounds_of(manifest)] == ["initial", "chat"]
    deltas = [e for e in read_events(run_dir / "events.jsonl") if e["type"] == "delta"]
    assert "".join(e["text"] for e in deltas if e["round"] == 2) == added


def test_target_words_stops_at_a_paragraph_boundary(tmp_path: Path) -> None:
    reply = "one two three four.\n\nfive six seven eight.\n\nnine ten eleven."
    manifest, text, backend, _ = run_one(
        tmp_path, one_section("kv", target_words=6), [(reply, "length")]
    )
    assert text == "one two three four.\n\nfive six seven eight."
    assert len(backend.calls) == 1 and backend.resumes == []
    assert backend.closes == ["s"]  # the cut-off generation is ended
    sec = manifest["sections"][0]
    assert (sec["status"], sec["truncated"], sec["words"], sec["target_words"]) == (
        "completed",
        False,
        8,
        6,
    )
    assert sec["length_score"] == round(length_score(6, 8), 1)
    (rnd,) = sec["rounds"]
    assert (rnd["finish_reason"], rnd["stop_reason"]) == ("stop", "target_words")


def test_target_words_reached_in_a_kv_round(tmp_path: Path) -> None:
    replies: list[Reply] = [
        ("one two three four five", "length"),
        (" six.\n\nseven eight", "length"),
    ]
    manifest, text, backend, _ = run_one(tmp_path, one_section("kv", target_words=6), replies)
    assert text == "one two three four five six."
    assert backend.resumes == [("s", 10)]
    assert [r["finish_reason"] for r in rounds_of(manifest)] == ["length", "stop"]


def test_short_text_writes_on_past_its_end(tmp_path: Path) -> None:
    # a model that stopped short of its target continues its own text as an open assistant
    # message after a paragraph break, with its end of text held off for a while
    replies: list[Reply] = [("一二三。", "stop"), ("four five six seven 😀.", "stop")]
    manifest, text, backend, _ = run_one(tmp_path, one_section("kv", target_words=6), replies)
    assert text == "一二三。\n\nfour five six seven 😀."
    first, second = backend.calls
    assert second.continue_final is True
    assert second.messages == [*first.messages, {"role": "assistant", "content": "一二三。\n\n"}]
    assert first.params.min_tokens == 0
    assert second.params.min_tokens == min(EXTEND_MIN_TOKENS, second.params.max_tokens)
    assert [r["strategy"] for r in rounds_of(manifest)] == ["initial", "prefix"]
    assert manifest["sections"][0]["truncated"] is False


def test_short_text_asks_a_chat_server_for_more(tmp_path: Path) -> None:
    replies: list[Reply] = [("one two three.", "stop"), ("four five six seven.", "stop")]
    manifest, text, backend, _ = run_one(
        tmp_path, one_section("chat", target_words=6), replies, kv=False
    )
    assert text == "one two three.\n\nfour five six seven."
    assert backend.calls[1].messages[-2:] == [
        {"role": "assistant", "content": "one two three."},
        {"role": "user", "content": MORE_PROMPT},
    ]
    assert [r["strategy"] for r in rounds_of(manifest)] == ["initial", "more"]
    assert manifest["sections"][0]["truncated"] is False


@pytest.mark.parametrize("strategy", ["kv", "prefix", "chat"])
def test_max_rounds_exhausted_marks_truncated(tmp_path: Path, strategy: str) -> None:
    replies: list[Reply] = [("aaa bbb ", "length"), ("ccc ddd ", "length")]
    manifest, text, backend, _ = run_one(tmp_path, one_section(strategy, max_rounds=2), replies)
    assert text == "aaa bbb ccc ddd"  # trailing whitespace is not kept
    assert manifest["status"] == "completed"
    sec = manifest["sections"][0]
    assert (sec["status"], sec["truncated"]) == ("completed", True)
    assert [r["finish_reason"] for r in sec["rounds"]] == ["length", "length"]
    assert manifest["metrics"]["continuation_success_rate"] == 0.0
    assert manifest["metrics"]["sections_truncated"] == 1
    assert manifest["document"] == "document.md"
    assert len(backend.calls) == (1 if strategy == "kv" else 2)
    assert "s" in backend.closes


def test_rounds_out_past_the_target_is_not_truncated(tmp_path: Path) -> None:
    replies: list[Reply] = [("one two three four", "length"), (" five six", "length")]
    manifest, text, _, _ = run_one(
        tmp_path, one_section("kv", max_rounds=2, target_words=5), replies
    )
    assert text == "one two three four five six"  # past the target, short of its ceiling
    assert manifest["sections"][0]["truncated"] is False


@pytest.mark.parametrize("target", [None, 5])
def test_half_a_character_at_the_final_cut_is_dropped(tmp_path: Path, target: Any) -> None:
    # The engine's final flush of a request cut at max_tokens inside a character ends in
    # U+FFFD; a section that stops there, truncated or past its target, never keeps it.
    extra = {"target_words": target} if target else {}
    replies: list[Reply] = [("茶的历史 ", "length"), ("很长 ", "length")]
    backend = FakeBackend({"s": replies}, tails={"s": "中\ufffd"})
    manifest, prepared = run(
        pipeline_from(one_section("kv", max_rounds=2, **extra)), backend, tmp_path
    )
    text = (prepared.run_dir.sections_dir / "s.md").read_text("utf-8")
    assert text == "茶的历史 很长 中"
    deltas = "".join(
        e["text"] for e in read_events(prepared.run_dir.events_path) if e["type"] == "delta"
    )
    assert deltas == text
    assert manifest["sections"][0]["truncated"] is (target is None)
