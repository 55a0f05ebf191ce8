"""A long section written from a plan of points: the plan is asked for first and kept out
of the text (the manifest's `plan`), each point is a new answer to a request that
carries the plan, the end of the text so far and the point to write, a point ends at a
paragraph break past its share or where the model ends it (a point that comes out thin
is asked for once more), and a model that stops short is given the next point, not
pushed to write on. Scripted backend: the first reply answers the plan request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gen.pipeline.run.points import ANSWER_TOKENS, parse_points, point_count, wants_plan
from tests.pipeline.fake_backend import FakeBackend, Reply, pipeline_from, run

PLAN = "Here is the plan:\n1. Where to find them\n2. What lives there\n3. How to visit\n"
POINT_1 = (
    "Tide pools form on rocky shores where the sea withdraws twice a day. The best ones "
    "lie on flat shelves of sandstone or basalt, below the line of barnacles, and they hold "
    "water even at the lowest spring tides of the year."
)
POINT_2 = (
    "Anemones close into green knots when the water drains. Hermit crabs trade shells in "
    "the shallows, periwinkles graze the films of algae, and a sculpin waits among the "
    "weed for shrimp that stray too near its mouth."
)
PAST_2 = "Starfish pry mussels open with patient arms over many hours of slow pulling."
POINT_3 = (
    "Go at low tide, wear shoes that grip wet rock, and turn every stone back the way it "
    "lay. Watch the swell, and leave the animals where you found them."
)


def planned(
    tmp_path: Path, replies: list[Reply], prompt: str, **fields: Any
) -> tuple[dict[str, Any], str, FakeBackend]:
    backend = FakeBackend({"s": replies}, chunk=7)
    extra = "".join(f"    {k}: {v}\n" for k, v in fields.items())
    yaml = (
        "name: points\n"
        "defaults: {max_tokens: 400, temperature: 0.7, seed: 3}\n"
        "sections:\n"
        "  - id: s\n"
        f'    prompt: "[s] {prompt}"\n' + extra
    )
    manifest, prepared = run(pipeline_from(yaml), backend, tmp_path)
    text = (prepared.run_dir.sections_dir / "s.md").read_text("utf-8")
    return manifest["sections"][0], text, backend


def test_a_planned_section_writes_its_points_in_turn(tmp_path: Path) -> None:
    replies: list[Reply] = [
        (PLAN, "stop"),
        (POINT_1, "stop"),  # the model ends point 1: point 2 follows
        (POINT_2 + "\n\n" + PAST_2, "stop"),  # past its share: cut at the paragraph break
        (POINT_3, "stop"),  # short of the target, and the last: the section ends
    ]
    sec, text, backend = planned(
        tmp_path, replies, "Write a guide to tide pools.", target_words=110, plan="true"
    )
    assert text == f"{POINT_1}\n\n{POINT_2}\n\n{POINT_3}"
    assert "Where to find them" not in text and PAST_2 not in text
    assert len(backend.calls) == 4  # the plan, then one request a point, and no push
    asked = backend.calls[0].messages[-1]["content"]
    assert asked.startswith("[s] Write a guide to tide pools.") and "numbered list" in asked
    first = backend.calls[1]
    assert 'Now write point 1, "Where to find them"' in first.messages[-1]["content"]
    for n, call in ((2, backend.calls[2]), (3, backend.calls[3])):
        assert not call.continue_final and call.messages[-1]["role"] == "user"
        user = call.messages[-1]["content"]  # a new answer, told where the text stands
        assert "1. Where to find them\n2. What lives there\n3. How to visit" in user
        assert f"point {n}" in user or "last point" in user
    assert 'The text so far ends:\n"""\nTide pools form' in backend.calls[2].messages[-1]["content"]
    assert "sculpin waits among the weed" in backend.calls[3].messages[-1]["content"]
    assert "end the text with it" in backend.calls[3].messages[-1]["content"]
    assert sec["plan"]["points"] == ["Where to find them", "What lives there", "How to visit"]
    assert sec["plan"]["written"] == 3 and sec["plan"]["starts"][0] == 0
    assert sec["plan"]["prompt_tokens"] > 0 and not sec["degenerate"]


def test_a_chinese_section_gets_its_plan_and_points_in_chinese(tmp_path: Path) -> None:
    replies: list[Reply] = [
        ("1. 茶的起源\n2. 茶的制作\n3. 茶与生活\n", "stop"),
        ("茶起源于中国西南，最早被当作药材使用。", "stop"),
        ("制茶要经过采摘、萎凋、揉捻和干燥。", "stop"),
        ("今天，喝茶仍是许多人每天的习惯。", "stop"),
    ]
    sec, text, backend = planned(
        tmp_path, replies, "请写一篇关于茶的文章。", target_words=60, plan="true"
    )
    assert "按顺序列出3个要点" in backend.calls[0].messages[-1]["content"]
    assert "现在接着往下写第2点“茶的制作”" in backend.calls[2].messages[-1]["content"]
    assert "最后一个要点" in backend.calls[3].messages[-1]["content"]
    assert text.startswith("茶起源于中国西南") and text.endswith("每天的习惯。")
    assert "茶的起源" not in text and sec["plan"]["written"] == 3


def test_a_plan_that_does_not_parse_leaves_the_section_as_one_answer(tmp_path: Path) -> None:
    replies: list[Reply] = [("Sure.", "stop"), (POINT_1, "stop")]
    sec, text, backend = planned(
        tmp_path, replies, "Write about tide pools.", target_words=40, plan="true"
    )
    assert text == POINT_1 and sec["plan"]["points"] == []
    assert "Now write" not in backend.calls[1].messages[-1]["content"]


def test_only_a_target_longer_than_one_answer_is_planned(tmp_path: Path) -> None:
    short, _, backend = planned(tmp_path / "a", [(POINT_1, "stop")], "Write.", target_words=30)
    assert "plan" not in short and len(backend.calls) == 1
    # the fake counts a token a character: 180 words are more than one answer
    replies: list[Reply] = [(PLAN, "stop"), (POINT_1, "stop"), (POINT_2, "stop"), (POINT_3, "stop")]
    long, _, backend = planned(tmp_path / "b", replies, "Write.", target_words=180)
    assert (
        long["plan"]["written"] == 3 and "numbered list" in backend.calls[0].messages[-1]["content"]
    )
    off, _, backend = planned(
        tmp_path / "c",
        [(POINT_1, "stop")] * 4,
        "Write.",
        target_words=400,
        plan="false",
        max_rounds=1,
    )
    assert "plan" not in off and "numbered list" not in backend.calls[0].messages[-1]["content"]


def test_the_decision_and_the_count() -> None:
    assert wants_plan("auto", ANSWER_TOKENS + 1, prose=True)
    assert not wants_plan("auto", ANSWER_TOKENS, prose=True)
    assert not wants_plan("auto", None, prose=True) and not wants_plan(True, 5000, prose=False)
    assert wants_plan(True, 10, prose=True) and not wants_plan(False, 5000, prose=True)
    assert point_count(100) == 3 and point_count(1600) == 4 and point_count(100_000) == 10
    assert parse_points("Sure! Here it is:\n1. One\n2. Two\n3. Three", 2) == ["One", "Two"]
    assert parse_points("Just one line.", 3) == []


def test_a_point_that_comes_out_thin_is_asked_for_once_more(tmp_path: Path) -> None:
    replies: list[Reply] = [
        (PLAN, "stop"),
        (POINT_1, "stop"),
        ("Crabs.", "stop"),  # point 2: a word of its 35
        (POINT_2, "stop"),  # asked again
        ("Go.", "stop"),  # the last point, thin, asked again: thin again, the section ends
        ("", "stop"),
    ]
    sec, text, backend = planned(
        tmp_path, replies, "Write a guide to tide pools.", target_words=110, plan="true"
    )
    assert text == f"{POINT_1}\n\nCrabs.\n\n{POINT_2}\n\nGo."
    assert len(backend.calls) == 6 and sec["plan"]["written"] == 3
    again = backend.calls[3].messages[-1]["content"]
    assert 'Now write point 2, "What lives there"' in again and "Crabs." in again
