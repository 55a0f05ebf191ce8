"""Coherence across sections: overlap of word 5-grams with earlier sections, and the body
checked against its outline (every item a heading, in order; no heading twice)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gen.text.coherence import check_outline, section_overlap
from tests.pipeline.fake_backend import FakeBackend, pipeline_from, read_events, run

BODY = (
    "# 茶道\n\n## 1. 茶的历史\n\n文字。\n\n## Part 2: Water and fire 🔥\n\nText.\n\n## Conclusion\n"
)


def test_every_item_a_heading_in_order() -> None:
    check = check_outline(BODY, ["茶的历史", "Water and fire 🔥"])
    assert check.followed and check.missing == [] and check.repeated == []


def test_an_item_out_of_order_or_missing_is_named() -> None:
    check = check_outline(BODY, ["Water and fire 🔥", "茶的历史", "Tea bowls"])
    assert not check.followed
    assert check.missing == ["茶的历史", "Tea bowls"]


def test_a_heading_twice_is_named() -> None:
    check = check_outline(BODY + "\n## 5. Conclusion\n", ["茶的历史"])
    assert not check.followed and check.repeated == ["5. Conclusion"]
    fenced = BODY + "\n```\n## Conclusion\n```\n"  # a heading in code is no heading
    assert check_outline(fenced, ["茶的历史"]).followed


def test_overlap_is_the_share_of_5_grams_said_before() -> None:
    earlier = ["The press spread books across Europe in a few decades."]
    assert section_overlap("Paper mills grew near the rivers of the north.", earlier) == 0.0
    said_again = "The press spread books across Europe quickly."  # 2 of its 3 5-grams
    assert section_overlap(said_again, earlier) == 2 / 3
    assert section_overlap("印刷术传遍了欧洲各地的城市。", ["印刷术传遍了欧洲"]) > 0.3


REPORT = """\
name: t
model: fake
sections:
  - id: outline
    prompt: "[outline] Outline."
    parse: list
  - id: part
    foreach: sections.outline.items
    prompt: "[part-{{ loop_index }}] Write about {{ item }}."
  - id: ending
    title: Conclusion
    prompt: "[ending] Conclude."
document:
  inline: |
    # Report
    {% for p in sections.part.parts %}
    ## {{ p.title }}

    {{ p.text }}
    {% endfor %}
    ## {{ sections.ending.title }}

    {{ sections.ending.text }}
"""


def test_the_manifest_reports_overlap_and_the_outline(tmp_path: Path) -> None:
    said = "The first presses printed calendars and prayer books for the town."
    backend = FakeBackend(
        {
            "outline": [("1. Early presses\n2. 活字印刷 😀\n", "stop")],
            "part-1": [(said, "stop")],
            "part-2": [("Movable type changed how books were made. " + said, "stop")],
            "ending": [("## Conclusion\n\nIn the end, print won.", "stop")],
        }
    )
    manifest, _ = run(pipeline_from(REPORT), backend, tmp_path)
    by_id = {s["id"]: s for s in manifest["sections"]}
    assert by_id["outline"]["overlap"] is None  # not in the document
    assert by_id["part-1"]["overlap"] == 0.0
    assert 0.3 < by_id["part-2"]["overlap"] < 0.7
    metrics = manifest["metrics"]
    assert metrics["overlap_max"] == by_id["part-2"]["overlap"]
    # the ending's own "## Conclusion" is demoted below the section's heading, so the
    # document holds one Conclusion heading, and every item is a heading in order
    assert metrics["outline_followed"] is True, metrics
    assert metrics["outline_missing"] == [] and metrics["headings_repeated"] == []


# -- an echo of an earlier section is cut while the section streams ------------------------

SAID = "The first presses printed calendars and prayer books for the merchants of the town."
SAID_ZH = "最早的印刷机为城里的商人印制日历和祈祷书，这改变了他们的生活方式。"


def earlier_grams(text: str) -> frozenset[tuple[str, ...]]:
    from gen.pipeline.run.repetition import ECHO_N
    from gen.text.quality import ngrams, tokens

    return frozenset(ngrams(tokens(text), ECHO_N))


@pytest.mark.parametrize(
    ("said", "fresh", "echo"),
    [
        (SAID, "Paper mills grew along the rivers of the north. ", SAID.replace("town", "city")),
        (SAID_ZH, "北方的河边建起了许多造纸厂。", SAID_ZH.replace("城里", "镇上")),
    ],
)
def test_a_sentence_an_earlier_section_said_is_an_echo(said: str, fresh: str, echo: str) -> None:
    from gen.pipeline.run.repetition import LoopDetector

    detector = LoopDetector(earlier=earlier_grams(said))
    assert detector.feed(fresh) is None
    found = detector.feed(echo + " ")
    assert found is not None and found.kind == "echo", found
    assert found.start == len(fresh) and found.keep == len(fresh.rstrip())
    # a sentence that shares a phrase but says something new is not an echo
    other = LoopDetector(earlier=earlier_grams(said))
    assert other.feed("Calendars and prayer books sold well, but maps sold better. ") is None


def test_an_echo_is_cut_and_the_retry_is_told_what_was_covered(tmp_path: Path) -> None:
    yaml = """\
name: t
model: fake
defaults: {temperature: 0.7, seed: 3}
sections:
  - id: first
    prompt: "[first] Write."
  - id: second
    prompt: "[second] Write more after {{ sections.first.text }}"
"""
    fresh = "Paper mills grew along the rivers of the north. "
    backend = FakeBackend(
        {
            "first": [(SAID, "stop")],
            "second": [(fresh + SAID + " More.", "length"), (" Ink came from soot. 😀", "stop")],
        },
        chunk=5,
    )
    manifest, prepared = run(pipeline_from(yaml), backend, tmp_path)
    second = {s["id"]: s for s in manifest["sections"]}["second"]
    assert second["rounds"][0]["repetition"]["kind"] == "echo"
    text = (prepared.run_dir.sections_dir / "second.md").read_text("utf-8")
    assert text == fresh + "Ink came from soot. 😀"
    retry = backend.calls_for("second")[1]
    user = next(m["content"] for m in retry.messages if m["role"] == "user")
    assert "Already covered earlier in the document" in user and SAID in user
    events = read_events(prepared.run_dir.events_path)
    shown = "".join(e["text"] for e in events if e["type"] == "delta" and e["section"] == "second")
    assert shown == text
