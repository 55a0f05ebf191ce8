"""`gen bench --outlines` on a scripted fake backend: the tech-report's outline section alone,
held and free, each outline checked and counted. No timing is asserted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gen.bench.outlines import CHECKS, TOPICS, check_outline, outline_pipeline, run_outlines
from tests.bench import PIPELINES, bench
from tests.pipeline.fake_backend import FakeBackend, Reply, install

GOOD = "1. Reed and brass\n2. Swing bands\n3. Bebop harmony\n4. Recording studios\n5. Festivals\n"
FREE: dict[str, tuple[str, set[str]]] = {  # a free outline and the checks it fails
    "good": (GOOD, set()),
    "preamble": ("Here is the outline:\n\n" + GOOD, {"only_list"}),
    "six": (GOOD + "6. Radio\n", {"count"}),
    "four": ("".join(GOOD.splitlines(keepends=True)[:4]), {"count"}),
    "generic": (GOOD.replace("Reed and brass", "Introduction to the topic"), {"no_generic"}),
    "plural": (GOOD.replace("5. Festivals", "5. swing band:"), {"distinct"}),
    "sentence": (GOOD.replace("Swing bands", "It began in cities. It spread."), {"single_line"}),
    "long": (GOOD.replace("Festivals", "Festivals " + "and more " * 10), {"single_line"}),
    "prose": ("It is a kind of music with a long history.\n", {"count", "only_list"}),
    "results": (GOOD.replace("Swing bands", "Results"), {"no_generic"}),
}


def test_what_an_outline_gets_right() -> None:
    for name, (text, fails) in FREE.items():
        got = check_outline(text, 5)
        assert {c for c in CHECKS if not got[c]} == fails | ({"ok"} if fails else set()), name
    assert check_outline(GOOD, 5)["items"][0] == "Reed and brass"
    assert check_outline(GOOD, 4)["count"] is False
    # bullets are a list too; the colon after a title is not part of it
    bullets = check_outline("- Reeds:\n- Drums\n", 2)
    assert bullets["ok"] and bullets["items"] == ["Reeds", "Drums"]


def test_held_and_free_are_one_section_greedy() -> None:
    topic = TOPICS[0]
    held = outline_pipeline(topic, "held", PIPELINES)
    free = outline_pipeline(topic, "free", PIPELINES)
    for pipeline in (held, free):
        assert [s.id for s in pipeline.sections] == ["outline"]
        assert pipeline.sections[0].temperature == 0 and pipeline.sections[0].parse == "list"
        assert pipeline.inputs["topic"] == topic
    assert held.sections[0].format is None and free.sections[0].format == "none"
    with pytest.raises(ValueError, match="mode must be one of held, free, got 'loose'"):
        outline_pipeline(topic, "loose", PIPELINES)


def test_no_test_uses_a_topic() -> None:
    # a topic a test uses is one the pipeline may have been tuned on
    tests = Path(__file__).resolve().parents[1]
    texts = [p.read_text("utf-8").lower() for p in tests.rglob("*.py")]
    assert len(TOPICS) == 10
    for topic in TOPICS:
        assert not any(topic.lower() in text for text in texts), topic


def scripted() -> FakeBackend:
    replies: list[Reply] = [(GOOD, "stop")] * len(TOPICS)
    replies += [(text, "stop") for text, _ in FREE.values()]
    return FakeBackend(scripts={"default": replies})


def test_the_bench_counts_held_and_free_outlines(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    backend = scripted()
    install(monkeypatch, backend)
    notes: list[str] = []
    r = run_outlines("fake-model", notes.append, tmp_path, pipelines=PIPELINES)
    assert len(backend.calls) == 2 * len(TOPICS) and len(notes) == 2 * len(TOPICS)
    assert all(c.params.temperature == 0 for c in backend.calls)  # greedy
    assert any(TOPICS[0] in m["content"] for m in backend.calls[0].messages)
    assert (r["topics"], r["n_parts"], r["held_by_grammar"]) == (10, 5, False)
    rows = r["rows"]
    assert [(x["mode"], x["topic"]) for x in rows] == [
        (mode, topic) for mode in ("held", "free") for topic in TOPICS
    ]
    assert all(x["ok"] and len(x["items"]) == 5 for x in rows[:10])
    assert r["summary"]["held"] == {"outlines": 10} | {c: 10 for c in CHECKS}
    # the section runner drops the preamble ("Here is the outline:"): chatter at the opening
    fails = [set() if name == "preamble" else fail for name, (_, fail) in FREE.items()]
    expected = {c: sum(c not in f for f in fails) for c in CHECKS if c != "ok"}
    assert r["summary"]["free"] == {"outlines": 10, **expected, "ok": 2}
    assert expected == {"count": 7, "distinct": 9, "single_line": 8, "no_generic": 8,
                        "only_list": 9}  # fmt: skip


def test_the_cli_prints_the_outline_table(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    install(monkeypatch, scripted())
    assert bench("--outlines", out=tmp_path) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["outline", "5", "items"] and lines[0].endswith("all")
    assert lines[1].split()[0] == "held" and lines[1].split()[-1] == "10/10"
    assert lines[2].split()[0] == "free" and lines[2].split()[-1] == "2/10"
    assert "held ran free as well" in lines[3]

    install(monkeypatch, scripted())
    assert bench("--outlines", "--json", out=tmp_path) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["summary"]["free"]["ok"] == 2 and len(printed["rows"]) == 20
