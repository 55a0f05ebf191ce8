"""A round that loops: it is stopped, trimmed back to its last sound sentence, and tried
again from there with another seed and stronger penalties; a section that keeps looping
is marked degenerate. Scripted backend; the deltas always add up to the section's text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.pipeline.fake_backend import FakeBackend, Reply, pipeline_from, read_events, run

from .test_continuation import one_section

LOOP_EN = "The signal box stood beside the line for many years. " * 4
LOOP_ZH = "信号楼在铁路旁边矗立了很多年。" * 4
SOUND_EN = "Railway signalling began with flags and lamps. "
SOUND_ZH = "铁路信号最早使用旗子和灯。"


def deltas_of(run_dir: Path) -> str:
    events = read_events(run_dir / "events.jsonl")
    return "".join(e["text"] for e in events if e["type"] == "delta")


def run_section(
    tmp_path: Path, replies: list[Reply], strategy: str = "kv", **extra: Any
) -> tuple[dict[str, Any], str, FakeBackend, Path]:
    backend = FakeBackend({"s": replies}, chunk=3)
    yaml = one_section(strategy, **{"max_tokens": 50, "max_rounds": 4, **extra})
    yaml = yaml.replace("defaults: {", "defaults: {temperature: 0.7, seed: 3, ")
    manifest, prepared = run(pipeline_from(yaml), backend, tmp_path)
    text = (prepared.run_dir.sections_dir / "s.md").read_text("utf-8")
    return manifest, text, backend, prepared.run_dir.path


@pytest.mark.parametrize(("sound", "loop"), [(SOUND_EN, LOOP_EN), (SOUND_ZH, LOOP_ZH)])
def test_a_loop_is_cut_and_retried_from_the_trimmed_text(
    tmp_path: Path, sound: str, loop: str
) -> None:
    ending = " 😀 The end." if sound == SOUND_EN else "完。😀"
    replies: list[Reply] = [(sound + loop, "length"), (ending, "stop")]
    manifest, text, backend, run_dir = run_section(tmp_path, replies)
    first_copy = loop[: len(loop) // 4]
    kept = (sound + first_copy).rstrip()
    assert text == kept + ending
    assert deltas_of(run_dir) == text  # nothing shown twice, nothing lost
    first, retry = backend.calls
    # the retry continues the trimmed text as an open assistant message
    assert retry.continue_final is True
    assert retry.messages[-1] == {"role": "assistant", "content": kept}
    assert retry.params.seed != first.params.seed
    assert retry.params.dry_multiplier > first.params.dry_multiplier
    assert retry.params.frequency_penalty == first.params.frequency_penalty == 0.0
    sec = manifest["sections"][0]
    rounds = sec["rounds"]
    assert [(r["finish_reason"], r["stop_reason"]) for r in rounds] == [
        ("stop", "repetition"),
        ("stop", None),
    ]
    assert rounds[0]["repetition"]["kind"] in ("sentence", "span")
    assert [r["retry"] for r in rounds] == [0, 1]
    assert sec["degenerate"] is False
    assert sec["repeated_sentences"] == 0.0
    assert manifest["metrics"]["repetition_retries"] == 1


def test_a_section_that_keeps_looping_is_degenerate(tmp_path: Path) -> None:
    replies: list[Reply] = [(SOUND_EN + LOOP_EN, "length")] + [(" " + LOOP_EN, "length")] * 2
    manifest, text, backend, run_dir = run_section(tmp_path, replies, loop_retries=2)
    assert len(backend.calls) == 3  # the first try and two retries
    sec = manifest["sections"][0]
    assert sec["degenerate"] is True and sec["status"] == "completed"
    assert manifest["metrics"]["sections_degenerate"] == 1
    assert text.count("The signal box stood beside the line") == 1  # every loop cut away
    assert deltas_of(run_dir) == text


def sound_paragraph(n: int) -> str:
    """About 90 words about signalling, each sentence its own (no refrain, no repeat)."""
    return " ".join(
        f"In {1840 + 7 * n + i} the {place} line {verb} {thing} at its junction {i + n}."
        for i, (place, verb, thing) in enumerate(
            [("York", "tried", "semaphores"), ("Leeds", "fitted", "interlocking frames"),
             ("Derby", "added", "track circuits"), ("Crewe", "bought", "block instruments"),
             ("Bath", "tested", "lamps with coloured glass"), ("Hull", "wired", "bells"),
             ("Ely", "ordered", "new levers"), ("Wick", "painted", "its posts white"),
             ("Ayr", "built", "a tall cabin"), ("Rye", "replaced", "its wooden arms")]
        )
    )  # fmt: skip


def test_a_retry_that_goes_on_soundly_earns_a_fresh_budget(tmp_path: Path) -> None:
    # each retry writes ~90 sound words, then loops again: progress, not a stuck loop (a
    # budget of 4 x 1000 tokens holds the ~2,000 characters kept)
    replies: list[Reply] = [
        (SOUND_EN + LOOP_EN, "length"),
        *[(" " + sound_paragraph(n) + " " + LOOP_EN, "length") for n in range(1, 4)],
        (" 完。😀 The end.", "stop"),
    ]
    manifest, text, backend, run_dir = run_section(
        tmp_path, replies, loop_retries=1, max_tokens=1000
    )
    sec = manifest["sections"][0]
    assert sec["degenerate"] is False
    assert [r["retry"] for r in sec["rounds"]] == [0, 1, 2, 3, 4]
    assert all(sound_paragraph(n) in text for n in range(1, 4))
    assert text.endswith("完。😀 The end.")
    assert text.count("The signal box stood beside the line") == 1
    assert deltas_of(run_dir) == text
    seeds = [call.params.seed for call in backend.calls]
    assert len(set(seeds)) == 5  # every retry samples anew
    # DRY grows with the retries in a row that made no progress, not with all of them
    dry = [call.params.dry_multiplier for call in backend.calls]
    assert dry[1] == dry[2] == dry[3] == dry[4] > dry[0]


def test_a_more_round_that_restarts_the_section_is_cut(tmp_path: Path) -> None:
    opening = "Tea is grown in the hills of many countries today. It is picked by hand."
    replies: list[Reply] = [
        (opening, "stop"),  # short of the target: a `more` round follows
        (opening + " More text follows here now.", "stop"),  # it starts over
        ("Withering and rolling come next in the process.", "stop"),
    ]
    manifest, text, _, run_dir = run_section(tmp_path, replies, target_words=20)
    assert text.count("Tea is grown in the hills") == 1
    assert "Withering and rolling" in text
    assert deltas_of(run_dir) == text
    assert manifest["sections"][0]["rounds"][1]["stop_reason"] == "repetition"


SIBLINGS = """
name: sib
defaults: {max_tokens: 50, max_rounds: 2}
inputs:
  topics: [Early signal boxes, Electric interlocking]
sections:
  - id: part
    foreach: inputs.topics
    prompt: "[{{ 'a' if loop_index == 1 else 'b' }}] Write about {{ item }}."
"""


@pytest.mark.parametrize(
    ("reply", "kept"),
    [
        (
            "Levers moved the points.\n\n2. Electric interlocking came later.",
            "Levers moved the points.",
        ),
        (
            "Levers moved the points.\n\n## Electric Interlocking\n\nRelays 😀.",
            "Levers moved the points.",
        ),
        ("Levers moved the points.\nElectric interlocking:\nmore", "Levers moved the points."),
        ("信号杆。\n\n**Part 2: Electric interlocking**", "信号杆。"),
        # "The" before the title (or not) is the same title
        ("Levers moved the points.\n\n2. The electric interlocking", "Levers moved the points."),
        # the title inside a sentence, or a line that only begins with it: not a heading
        (
            "Electric interlocking came later, in 1900.\nElectric interlocking came later.",
            "Electric interlocking came later, in 1900.\nElectric interlocking came later.",
        ),
    ],
)
def test_a_fan_out_part_stops_at_a_sibling_title(tmp_path: Path, reply: str, kept: str) -> None:
    yaml = SIBLINGS
    backend = FakeBackend({"a": [(reply, "stop")], "b": [("Relays replaced levers.", "stop")]})
    manifest, prepared = run(pipeline_from(yaml), backend, tmp_path)
    first = backend.calls_for("a")[0]
    assert first.params.stop == ()  # a title is matched on whole lines, not as a stop string
    text = (prepared.run_dir.sections_dir / "part-1.md").read_text("utf-8")
    assert text == kept
    events = read_events(prepared.run_dir.events_path)
    assert (
        "".join(e["text"] for e in events if e.get("section") == "part-1" and "text" in e) == text
    )
    part = next(s for s in manifest["sections"] if s["id"] == "part-1")
    cut = kept != reply
    assert (part["rounds"][0]["stop_reason"] == "Electric interlocking") is cut


def test_a_part_that_starts_the_article_over_stops_there(tmp_path: Path) -> None:
    yaml = SIBLINGS + "document:\n  title: 铁路信号 Railway signalling\n"
    reply = (
        "Levers moved the points. Men pulled them by hand, all day long, in every weather."
        "\n\n# 铁路信号 Railway Signalling\nAgain."
    )
    backend = FakeBackend({"a": [(reply, "stop")], "b": [("Relays replaced levers.", "stop")]})
    manifest, prepared = run(pipeline_from(yaml), backend, tmp_path)
    text = (prepared.run_dir.sections_dir / "part-1.md").read_text("utf-8")
    assert text == reply.split("\n\n")[0]
    part = next(s for s in manifest["sections"] if s["id"] == "part-1")
    assert part["rounds"][0]["stop_reason"] == "铁路信号 Railway signalling"


def test_a_loop_begun_in_the_round_before_is_cut_there(tmp_path: Path) -> None:
    # the refrain starts in round 1 (cut off by length) and is found in round 2; its held
    # sentences are cut away, though round 1 has ended
    opening = "Bread is old. 面包很古老。 "
    refrain = [
        "The science of bread is a science.",
        "The science of yeast is a science.",
        "This science of flour is a science.",
        "The science of ovens is a science.",
        "The science of salt is a science.",
    ]
    replies: list[Reply] = [
        (opening + " ".join(refrain[:3]), "length"),
        (" " + " ".join(refrain[3:]) + " More.", "length"),
        (" Bakers rise early 😀. The end.", "stop"),
    ]
    manifest, text, backend, run_dir = run_section(tmp_path, replies)
    assert text == opening + refrain[0] + " Bakers rise early 😀. The end."
    assert deltas_of(run_dir) == text
    events = read_events(run_dir / "events.jsonl")
    by_round = {
        n: "".join(e["text"] for e in events if e["type"] == "delta" and e["round"] == n)
        for n in (1, 2, 3)
    }
    assert by_round == {1: opening + refrain[0], 2: "", 3: " Bakers rise early 😀. The end."}
    rounds = manifest["sections"][0]["rounds"]
    assert rounds[1]["stop_reason"] == "repetition"
    assert rounds[1]["repetition"]["kind"] == "refrain"
    retry = backend.calls[-1]  # (round 2 went on in the same kv stream)
    # the retry makes the refrain's subject less likely (the fake's id for a word: ord of
    # its first character), and the first request had no bias
    assert retry.params.logit_bias == ((ord("s"), -6.0),)
    assert backend.calls[0].params.logit_bias == ()
    assert retry.continue_final and retry.messages[-1]["content"] == opening + refrain[0]


def test_rounds_that_add_no_words_end_the_section(tmp_path: Path) -> None:
    # the bundled model in Chinese, at its worst: whole rounds of broken bytes and symbols
    replies: list[Reply] = [
        (SOUND_ZH, "length"),
        ("\ufffd" * 40, "length"),
        ("！？＃" * 10, "length"),
        ("这一轮不会被要求。", "stop"),
    ]
    manifest, text, _, run_dir = run_section(tmp_path, replies, target_words=400, plan="false")
    sec = manifest["sections"][0]
    assert len(sec["rounds"]) == 3
    assert sec["degenerate"] is True and sec["truncated"] is True
    # what the stalled rounds wrote is cut back where it was not shown yet ("！" and "？" end
    # sentences, so most of it was)
    assert text.startswith(SOUND_ZH) and len(text) < len(SOUND_ZH) + 40 + 30
    assert deltas_of(run_dir) == text


def test_a_part_that_begins_a_sibling_early_is_retried(tmp_path: Path) -> None:
    yaml = """
name: sib
defaults: {max_tokens: 50, max_rounds: 2, temperature: 0.7, seed: 1}
inputs:
  topics: [Early signal boxes, Electric interlocking]
sections:
  - id: part
    foreach: inputs.topics
    prompt: "[{{ 'a' if loop_index == 1 else 'b' }}] Write about {{ item }}."
    target_words: 12
"""
    backend = FakeBackend(
        {
            # the part writes the plan instead of itself, then does better on the retry
            "a": [
                ("1. Early signal boxes\n2. Electric interlocking\n3. Relays", "stop"),
                (
                    "Levers in a wooden cabin moved the points and the signals 😀 for decades.",
                    "stop",
                ),
            ],
            "b": [("Relays replaced levers, one circuit at a time, across the network.", "stop")],
        }
    )
    manifest, prepared = run(pipeline_from(yaml), backend, tmp_path)
    text = (prepared.run_dir.sections_dir / "part-1.md").read_text("utf-8")
    assert "Electric interlocking" not in text and text.endswith("for decades.")
    part = next(s for s in manifest["sections"] if s["id"] == "part-1")
    first, second = part["rounds"]
    assert first["stop_reason"] == "repetition" and first["repetition"]["kind"] == "sibling"
    assert second["retry"] == 1
    retry = backend.calls_for("a")[1]
    assert retry.params.logit_bias == ((ord("e"), -6.0),)  # "electric", the fake's ids
