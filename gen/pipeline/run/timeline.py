"""A run's events drawn as an SVG timeline: one row per section, one rect per round, over time.

timeline_svg is a pure function (events in, SVG text out, no file IO); write_timeline is the one
place that reads events.jsonl and writes timeline.svg next to it."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from gen.files import atomic_write
from gen.pipeline.run.events import read_events
from gen.pipeline.run.repetition import READER_CUTS

WIDTH, LABEL_W, RIGHT, TOP, ROW, BAR = 900, 200, 24, 40, 24, 16
X0, X1 = LABEL_W, WIDTH - RIGHT
FONT = "system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif"
COLOURS = {  # a round's class suffix -> fill: how the round ended
    "stop": "#4c9f70",
    "length": "#4a7fc1",
    "repetition": "#e0822c",
    "target": "#8e6cc2",
    "other": "#9a9a9a",
}
LEGEND = {"stop": "stop", "length": "length", "repetition": "cut (a loop, junk, chatter, …)"}
LEGEND |= {"target": "target words", "other": "other"}
ERROR, OPEN_FILL = "#d62728", "url(#hatch)"
STRIPE = {"fill": "#000", "fill_opacity": "0.04"}  # see-through: grid lines stay visible
DASHED = {"stroke_dasharray": "4 3"}
NUMBER = {"font_size": 9, "text_anchor": "middle", "pointer_events": "none"}
STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


@dataclass(slots=True)
class Bar:
    n: int
    start: float
    end: float
    kind: str  # a COLOURS key, or "open" for a round that never finished
    tip: str
    earlier: bool = False  # from an attempt that a later section_started restarted


@dataclass(slots=True)
class Row:
    key: str
    title: str
    bars: list[Bar] = field(default_factory=list)
    cached: list[float] = field(default_factory=list)
    errors: list[tuple[float, str]] = field(default_factory=list)
    running: bool = False
    mark: float = 0.0  # where the next round starts: the section's start or its last round's end

    def next_round(self) -> int:
        return 1 + sum(1 for b in self.bars if not b.earlier and b.kind != "open")

    def finish_round(self, e: dict[str, Any], t: float) -> None:
        secs = _num(e.get("seconds"))
        start = t - secs if secs is not None else self.mark
        n = e["round"] if isinstance(e.get("round"), int) else self.next_round()
        finish, stop = e.get("finish_reason"), e.get("stop_reason")
        kind = {"repetition": "repetition", "target_words": "target", "conclusion": "target"}.get(
            str(stop), ""
        )
        kind = "repetition" if str(stop) in READER_CUTS else kind  # cut by a reader check
        kind = kind or (finish if finish in ("stop", "length") else "other")
        reason = stop if kind in ("repetition", "target") else finish
        tok, tps = _num(e.get("completion_tokens")), _num(e.get("tokens_per_second"))
        secs = t - start
        if tps is None and tok is not None and secs > 0:
            tps = tok / secs
        tip = [f"{self.key} round {n}: {reason}"]
        tip += [f"{tok:g} tok"] if tok is not None else []
        tip += [f"{tps:.1f} tok/s"] if tps is not None else []
        self.bars.append(Bar(n, start, t, kind, ", ".join([*tip, f"{secs:.1f} s"])))
        self.mark = t

    def close(self, t: float, why: str) -> None:
        """The round in flight ends unfinished at t (live, interrupted or failed)."""
        if self.running:
            n = self.next_round()
            tip = f"{self.key} round {n}: {why}, {t - self.mark:.1f} s"
            self.bars.append(Bar(n, self.mark, max(t, self.mark), "open", tip))
        self.running = False


def timeline_svg(events: Iterable[dict[str, Any]], *, now: float | None = None) -> str:
    rows: dict[str, Row] = {}
    bounds: list[tuple[float, str, str]] = []  # (time, label, text-anchor) of dashed lines
    t0: float | None = None
    last, runs = 0.0, 0
    for e in events:
        t = _num(e.get("time"))
        if t is None:
            continue
        t0, last = (t if t0 is None else t0), max(last, t)
        kind, key = e.get("type"), e.get("section")
        if kind in ("run_started", "run_finished"):
            runs += 1 if kind == "run_started" else 0
            if kind == "run_finished" or runs > 1:
                for row in rows.values():
                    row.close(t, "interrupted")
                label = "resumed" if kind == "run_started" else str(e.get("status", "finished"))
                bounds.append((t, label, "start" if kind == "run_started" else "end"))
            continue
        if not isinstance(key, str):
            continue
        row = rows.setdefault(key, Row(key, str(e.get("title") or key), mark=t))
        if kind == "section_started":
            row.title = str(e.get("title") or key)
            row.close(t, "interrupted")
            if e.get("cached"):
                row.cached.append(t)
            else:  # a restart from scratch: what came before is an earlier attempt
                for bar in row.bars:
                    bar.earlier = True
                row.running, row.mark = True, t
        elif kind == "round_finished":
            row.finish_round(e, t)
        elif kind == "section_finished":
            row.running = False
        elif kind == "error":
            row.errors.append((t, str(e.get("message", "error"))))
            row.close(t, "failed")
    if t0 is None:
        return _svg(60, [_text(WIDTH / 2, 35, "no events yet", text_anchor="middle")])
    end = last if now is None else now
    for row in rows.values():
        row.close(end, "running")
    return _draw(t0, max(end - t0, 1.0), list(rows.values()), bounds)


def _draw(t0: float, span: float, rows: list[Row], bounds: list[tuple[float, str, str]]) -> str:
    def x(t: float) -> float:
        return X0 + min(max(t - t0, 0.0), span) / span * (X1 - X0)

    axis, out = TOP + len(rows) * ROW + 4, []
    step = next((s for s in STEPS if span / s <= 8), 3600 * (int(span / 3600 / 8) + 1))
    for i in range(int(span // step) + 1):
        tx = x(t0 + i * step)
        out.append(_el("line", x1=tx, y1=TOP - 4, x2=tx, y2=axis, stroke="#e4e4e4"))
        out.append(_text(tx, axis + 15, _duration(i * step), text_anchor="middle", fill="#555"))
    out.append(_el("line", x1=X0, y1=axis, x2=X1, y2=axis, stroke="#888"))
    out += [_row(row, TOP + i * ROW, x, stripe=i % 2 == 1) for i, row in enumerate(rows)]
    for t, label, anchor in bounds:
        bx = x(t)
        anchor = "end" if bx > X1 - 60 else "start" if bx < X0 + 60 else anchor
        line = _el("line", x1=bx, y1=TOP - 14, x2=bx, y2=axis, stroke="#555", **DASHED)
        tag = _text(bx + (3 if anchor == "start" else -3), TOP - 16, label, text_anchor=anchor)
        out.append(_el("g", line + tag, class_="boundary"))
    return _svg(axis + 56, [*out, _legend(axis + 40)])


def _row(row: Row, y: float, x: Callable[[float], float], *, stripe: bool) -> str:
    mid = y + ROW / 2
    out = [_el("rect", class_="stripe", y=y, width=WIDTH, height=ROW, **STRIPE)] * stripe
    label = row.key if row.title == row.key else f"{row.key} · {row.title}"
    tip = f"<title>{_esc(label)}</title>"  # the whole title, where the label is cut short
    out.append(_text(8, mid + 4, _shorten(label, 32), tip, class_="label"))
    for b in row.bars:
        bx, bw = x(b.start), max(x(b.end) - x(b.start), 1.0)
        cls = ("open" if b.kind == "open" else f"round r-{b.kind}") + " earlier" * b.earlier
        fill = OPEN_FILL if b.kind == "open" else COLOURS[b.kind]
        box = {"x": bx, "y": mid - BAR / 2, "width": bw, "height": BAR, "fill": fill}
        look = {"stroke": "#fff", "stroke_width": "0.5", "opacity": "0.35" if b.earlier else "1"}
        out.append(_el("rect", f"<title>{_esc(b.tip)}</title>", class_=cls, **box, **look))
        if bw >= 14:  # room for the round number
            ink = "#335" if b.kind == "open" else "#fff"
            out.append(_text(bx + bw / 2, mid + 3, str(b.n), class_="n", fill=ink, **NUMBER))
    for t in row.cached:
        cx = min(x(t), X1 - 44)
        dot = _el("circle", cx=cx + 4, cy=mid, r="3.5", fill="#bbb")
        out.append(_el("g", dot + _text(cx + 11, mid + 4, "cached", fill="#777"), class_="cached"))
    for t, message in row.errors:
        tip, ex = f"<title>{_esc(f'{row.key} error: {message}')}</title>", x(t)
        red = {"stroke": ERROR, "stroke_width": 3}
        out.append(_el("line", tip, class_="error", x1=ex, y1=y + 2, x2=ex, y2=y + ROW - 2, **red))
    return _el("g", "".join(out), class_="section", data_section=row.key)


def _legend(y: float) -> str:
    items = [(f"r-{k}", COLOURS[k], text) for k, text in LEGEND.items()]
    items += [("open", OPEN_FILL, "unfinished"), ("error", ERROR, "error")]
    out, lx = "", float(X0)
    for cls, fill, text in items:
        out += _el("rect", class_=f"key key-{cls}", x=lx, y=y - 9, width=10, height=10, fill=fill)
        out += _text(lx + 14, y, text, fill="#444")
        lx += 26 + 6.5 * len(text)
    return _el("g", out, class_="legend")


def _svg(height: float, body: list[str]) -> str:
    hatch = (
        '<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect width="6" height="6" fill="#dde6f2"/>'
        '<line x1="0" y1="0" x2="0" y2="6" stroke="#7f9cc4" stroke-width="2"/></pattern></defs>'
    )
    h = round(height)
    inner = "\n".join(["", hatch, _el("rect", width=WIDTH, height=h, fill="#fff"), *body, ""])
    size = {"width": WIDTH, "height": h, "viewBox": f"0 0 {WIDTH} {h}", "font_size": 11}
    return _el("svg", inner, xmlns="http://www.w3.org/2000/svg", font_family=FONT, **size) + "\n"


def _el(tag: str, body: str = "", /, **attrs: object) -> str:
    """<tag …>body</tag>, attributes quoted; a name's _ becomes -, and class_ gives class."""
    names = {k: k.rstrip("_").replace("_", "-") for k in attrs}
    values = {k: f"{v:.1f}" if isinstance(v, float) else str(v) for k, v in attrs.items()}
    pairs = "".join(f" {names[k]}={quoteattr(_clean(v))}" for k, v in values.items())
    return f"<{tag}{pairs}>{body}</{tag}>" if body else f"<{tag}{pairs}/>"


def _text(x: float, y: float, s: str, child: str = "", /, **attrs: object) -> str:
    return _el("text", _esc(s) + child, x=x, y=y, **attrs)


def _clean(s: str) -> str:
    return _NOT_XML.sub("", s)


def _esc(s: str) -> str:
    return escape(_clean(s))


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _shorten(s: str, width: int) -> str:
    """Cut s to about `width` narrow characters (CJK counts two), ending in an ellipsis."""
    used = 0
    for i, ch in enumerate(s):
        used += 2 if unicodedata.east_asian_width(ch) in "WF" else 1
        if used > width:
            return s[:i].rstrip() + "…"
    return s


def _duration(seconds: float) -> str:
    s = round(seconds)
    h, m, sec = s // 3600, s % 3600 // 60, s % 60
    text = (f"{h}h" if h else "") + (f"{m}m" if m else "") + (f"{sec}s" if sec else "")
    return text or "0s"


def write_timeline(run_path: Path) -> None:
    """run_path/timeline.svg from run_path/events.jsonl; a torn last line does not count."""
    events = read_events(run_path / "events.jsonl")
    atomic_write(run_path / "timeline.svg", timeline_svg(events))
