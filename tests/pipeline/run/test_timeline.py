"""The run timeline: hand-built event lists in, an SVG that parses and shows what happened out."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from gen.pipeline.run.timeline import COLOURS, timeline_svg, write_timeline

NS = "{http://www.w3.org/2000/svg}"
T0 = 1_700_000_000.0


class Events:
    """A run's events, times in seconds from T0."""

    def __init__(self) -> None:
        self.list: list[dict[str, Any]] = []

    def add(self, t: float, type_: str, **fields: Any) -> Events:
        event = {"seq": len(self.list) + 1, "type": type_, "run_id": "r1", "time": T0 + t}
        self.list.append({**event, **fields})
        return self

    def run(self, t: float, resumed: bool = False) -> Events:
        return self.add(t, "run_started", pipeline="p", model="m", backend="b", resumed=resumed)

    def start(self, t: float, key: str, title: str | None = None, cached: bool = False) -> Events:
        return self.add(t, "section_started", section=key, title=title or key, cached=cached)

    def round(self, t: float, key: str, n: int, finish: str = "stop", **fields: Any) -> Events:
        fields = {"stop_reason": None, "completion_tokens": 100, **fields}
        return self.add(t, "round_finished", section=key, round=n, finish_reason=finish, **fields)

    def finish(self, t: float, key: str, cached: bool = False) -> Events:
        return self.add(t, "section_finished", section=key, status="completed", cached=cached)


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg"
    return root


def sections(root: ET.Element) -> dict[str, ET.Element]:
    return {g.attrib["data-section"]: g for g in root.iter(f"{NS}g") if cls(g) == {"section"}}


def cls(el: ET.Element) -> set[str]:
    return set(el.attrib.get("class", "").split())


def rects(el: ET.Element, name: str) -> list[ET.Element]:
    return [r for r in el.iter(f"{NS}rect") if name in cls(r)]


def span(r: ET.Element) -> tuple[float, float]:
    return float(r.attrib["x"]), round(float(r.attrib["x"]) + float(r.attrib["width"]), 1)


def child(el: ET.Element, tag: str) -> ET.Element:
    found = el.find(f"{NS}{tag}")
    assert found is not None, f"no <{tag}> in <{el.tag}>"
    return found


def text(el: ET.Element) -> str:
    return "".join(el.itertext())


def two_sections() -> Events:
    """intro alone, then part-1 and part-2 side by side; part-2 takes three rounds."""
    ev = Events().run(0).start(0, "intro", "Intro").round(10, "intro", 1).finish(10, "intro")
    ev.start(10, "part-1", "Leaves").start(11, "part-2", "Water")
    ev.round(40, "part-1", 1, seconds=25.0).finish(40, "part-1")  # began 5 s after its start
    ev.round(30, "part-2", 1, "length").round(50, "part-2", 2, "length")
    ev.round(60, "part-2", 3, "stop", stop_reason="repetition").finish(60, "part-2")
    return ev.add(61, "run_finished", status="completed")


def test_rows_follow_first_section_started_and_one_rect_per_round() -> None:
    ev = two_sections()
    root = parse(timeline_svg(ev.list))
    rows = sections(root)
    assert list(rows) == ["intro", "part-1", "part-2"]
    labels = [child(g, "text").text for g in rows.values()]
    assert labels == ["intro · Intro", "part-1 · Leaves", "part-2 · Water"]
    finished = sum(e["type"] == "round_finished" for e in ev.list)
    assert len(rects(root, "round")) == finished == 5
    assert [len(rects(g, "round")) for g in rows.values()] == [1, 1, 3]
    assert not rects(root, "open")


def test_rects_follow_time_and_concurrent_sections_overlap() -> None:
    rows = sections(parse(timeline_svg(two_sections().list)))
    intro = span(rects(rows["intro"], "round")[0])
    part1 = span(rects(rows["part-1"], "round")[0])
    part2 = [span(r) for r in rects(rows["part-2"], "round")]
    assert intro[1] < part1[0]  # part-1's round began at 15 s, after intro ended at 10 s
    assert part2[0][0] < part2[0][1] <= part2[1][0] + 0.1 < part2[1][1] <= part2[2][0] + 0.1
    assert part1[0] < part2[0][1] and part2[0][0] < part1[1]  # ran side by side
    assert abs((part1[1] - part1[0]) / (part2[0][1] - part2[0][0]) - 25 / 19) < 0.02


def test_colour_and_tooltip_say_how_a_round_ended() -> None:
    rows = sections(parse(timeline_svg(two_sections().list)))
    r1, _, r3 = rects(rows["part-2"], "round")
    fills = {r1.attrib["fill"], r3.attrib["fill"], rects(rows["intro"], "round")[0].attrib["fill"]}
    assert len(fills) == 3  # length, repetition, stop
    assert "r-length" in cls(r1) and "r-repetition" in cls(r3)
    assert r1.attrib["fill"] == COLOURS["length"] and r3.attrib["fill"] == COLOURS["repetition"]
    assert r1.findtext(f"{NS}title") == "part-2 round 1: length, 100 tok, 5.3 tok/s, 19.0 s"
    assert r3.findtext(f"{NS}title", "").startswith("part-2 round 3: repetition")
    ev = Events().start(0, "a").round(5, "a", 1, "stop", stop_reason="target_words")
    target = rects(parse(timeline_svg(ev.list)), "round")[0]
    assert "r-target" in cls(target) and target.attrib["fill"] not in fills


def test_ticks_are_readable_durations() -> None:
    ev = Events().run(0).start(0, "a").round(95, "a", 1).finish(95, "a")
    texts = {text(t) for t in parse(timeline_svg(ev.list)).iter(f"{NS}text")}
    assert {"0s", "30s", "1m", "1m30s"} <= texts


def test_text_from_the_model_is_escaped() -> None:
    title = '<b>"水" & 😀</b>'
    ev = Events().start(0, "intro", title).add(3, "error", section="intro", message="bad <x> & y")
    svg = timeline_svg(ev.list)
    root = parse(svg)
    assert "<b>" not in svg
    assert any(title in text(t) for t in root.iter(f"{NS}text"))
    error = next(el for el in root.iter() if "error" in cls(el) and el.tag == f"{NS}line")
    assert error.findtext(f"{NS}title") == "intro error: bad <x> & y"


def test_live_section_gets_an_open_rect_up_to_now() -> None:
    ev = Events().run(0).start(0, "a").round(10, "a", 1, "length")
    root = parse(timeline_svg(ev.list, now=T0 + 40))
    (done,) = rects(root, "round")
    (live,) = rects(root, "open")
    assert live.attrib["fill"] == "url(#hatch)"
    assert span(live)[0] == span(done)[1]  # round 2 started when round 1 ended
    assert abs((span(live)[1] - span(live)[0]) / (span(done)[1] - span(done)[0]) - 3) < 0.05
    assert live.findtext(f"{NS}title") == "a round 2: running, 30.0 s"
    assert not rects(parse(timeline_svg(ev.finish(12, "a").list)), "open")


def test_cached_section_has_a_marker_and_no_rects() -> None:
    ev = Events().run(0, resumed=True).start(0, "intro", cached=True).finish(0, "intro", True)
    ev.start(0, "body").round(20, "body", 1).finish(20, "body")
    rows = sections(parse(timeline_svg(ev.list)))
    assert not list(rows["intro"].iter(f"{NS}rect"))
    cached = [g for g in rows["intro"].iter(f"{NS}g") if "cached" in cls(g)]
    assert len(cached) == 1 and "cached" in text(cached[0])
    assert len(rects(rows["body"], "round")) == 1


def test_resume_draws_dashed_lines_and_fades_the_earlier_attempt() -> None:
    ev = Events().run(0).start(0, "a").round(10, "a", 1, "length")
    ev.add(15, "run_finished", status="cancelled").run(20, resumed=True)
    ev.start(21, "a").round(30, "a", 1).finish(30, "a").add(31, "run_finished", status="completed")
    root = parse(timeline_svg(ev.list))
    bounds = [g for g in root.iter(f"{NS}g") if "boundary" in cls(g)]
    assert [text(g) for g in bounds] == ["cancelled", "resumed", "completed"]
    assert all(child(g, "line").attrib["stroke-dasharray"] for g in bounds)
    rounds, opened = rects(root, "round"), rects(root, "open")
    assert ["earlier" in cls(r) for r in rounds] == [True, False]
    assert len(opened) == 1 and "earlier" in cls(opened[0])  # cut off by the cancel at 15 s
    assert opened[0].findtext(f"{NS}title") == "a round 2: interrupted, 5.0 s"


def test_no_events_gives_a_small_valid_svg() -> None:
    for events in ([], [{"type": "delta"}]):  # an event without a time does not count
        root = parse(timeline_svg(events))
        assert "no events yet" in text(root)


def test_write_timeline_ignores_a_torn_last_line(tmp_path: Path) -> None:
    ev = Events().run(0).start(0, "a").round(5, "a", 1).finish(5, "a")
    lines = [json.dumps(e, ensure_ascii=False) for e in ev.list]
    torn = '{"seq": 6, "type": "section_started", "section": "b", "title": "第'.encode()[:-1]
    (tmp_path / "events.jsonl").write_bytes("\n".join(lines).encode() + b"\n" + torn)
    write_timeline(tmp_path)
    root = parse((tmp_path / "timeline.svg").read_text(encoding="utf-8"))
    assert list(sections(root)) == ["a"]
    assert not list(tmp_path.glob(".*.tmp"))
    (tmp_path / "events.jsonl").write_bytes(b"")
    write_timeline(tmp_path)
    assert "no events yet" in (tmp_path / "timeline.svg").read_text(encoding="utf-8")
