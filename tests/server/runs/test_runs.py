"""The runs API on a real `gen serve` with the bundled model (docs/design.md §5, §6): a run over
HTTP, its events over SSE with Last-Event-ID replay (across a dropped stream and across a
killed and restarted server), a `gen run` in another process watched live, cancel, and
the limits (429 past the run queue, 401 without the key)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import Server, gen_command, running_server, wait_until

pytestmark = pytest.mark.real_model

# Three sections one after the other, so that a run can be stopped with some finished;
# the document is the sections' text joined, so it must equal the deltas joined.
PIPELINE = """
name: watched
defaults: {max_tokens: 24, max_rounds: 3, temperature: 0.7, seed: 5}
inputs:
  topic: 茶 and 😀
sections:
  - id: first
    prompt: "Write two sentences about {{ topic }}."
    target_words: 40
  - id: second
    prompt: "Write two sentences about rain in ไทย."
    target_words: 40
    depends_on: [first]
  - id: third
    prompt: "Write one sentence about the sea."
    depends_on: [second]
document:
  inline: "{% for p in parts %}{{ p.text }}{% endfor %}"
"""


class SSE:
    """A raw reading of text/event-stream: events (id, event, data), comments and retry."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.comments: list[str] = []
        self.retry: int | None = None

    def read(self, lines: Iterator[str], stop_after: int | None = None) -> SSE:
        fields: dict[str, str] = {}
        for line in lines:
            if line == "":
                if "data" in fields:
                    event = json.loads(fields["data"])
                    assert fields["id"] == str(event["seq"])
                    assert fields["event"] == event["type"]
                    self.events.append(event)
                    if stop_after is not None and len(self.events) >= stop_after:
                        return self
                fields = {}
            elif line.startswith(":"):
                self.comments.append(line[1:].strip())
            else:
                name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if name == "retry":
                    self.retry = int(value)
                else:
                    assert name not in fields, f"field {name} twice in one event"
                    fields[name] = value
        return self


def watch(
    server: Server,
    run_id: str,
    *,
    last_id: int | None = None,
    stop_after: int | None = None,
    key: str | None = None,
) -> SSE:
    headers = {"Accept": "text/event-stream"}
    if last_id is not None:
        headers["Last-Event-ID"] = str(last_id)
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    url = f"{server.v1}/runs/{run_id}/events"
    with httpx.stream("GET", url, headers=headers, timeout=300) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        return SSE().read(r.iter_lines(), stop_after)


# a `second` section that goes on for minutes: stopped (cancelled, killed) while it runs
LONG_SECOND = {"sections.second.target_words": 3000, "sections.second.max_rounds": 60}
# one that takes about half a minute: a server is killed while it runs, and the next resumes it
MEDIUM_SECOND = {"sections.second.target_words": 150, "sections.second.max_rounds": 10}


def start(server: Server, inputs: dict[str, Any] | None = None, key: str | None = None) -> str:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    body = {"pipeline": PIPELINE, "inputs": inputs or {}}
    r = httpx.post(f"{server.v1}/runs", json=body, headers=headers)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["status"] == "queued" and body["pipeline"] == "watched"
    return str(body["run_id"])


def run_dir(out: Path, run_id: str) -> Path:
    (path,) = out.glob(f"*/{run_id}")
    return path


def text_by_section(events: list[dict[str, Any]]) -> dict[str, str]:
    """Each section's text: its deltas since it last started afresh (a section_started that
    is not cached: a resumed run takes a finished section as it is, and writes it again
    from the start when it was unfinished)."""
    texts: dict[str, str] = {}
    for e in events:
        if e["type"] == "section_started" and not e["cached"]:
            texts[e["section"]] = ""
        elif e["type"] == "delta":
            texts[e["section"]] += e["text"]
    return texts


def assert_once_in_order(events: list[dict[str, Any]], first: int) -> None:
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(first, first + len(seqs))), seqs


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("outputs")


@pytest.fixture(scope="module")
def server(out: Path) -> Iterator[Server]:
    args = ("--out", str(out), "--max-runs", "2", "--max-run-queue", "1", "--sse-ping", "0.5")
    with running_server(*args) as s:
        yield s


def test_a_run_over_http_completes_and_its_document_is_its_deltas(
    server: Server, out: Path
) -> None:
    run_id = start(server, {"topic": "ไทย tea 🍵"})
    sse = watch(server, run_id)  # from the start, live, until the run is over
    events = sse.events
    assert_once_in_order(events, 1)
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "run_finished"
    assert events[-1]["status"] == "completed"
    assert sse.retry == 1000 and any(c.startswith("ping") for c in sse.comments)
    rounds = [e for e in events if e["type"] == "round_finished"]
    assert rounds and all(e["seconds"] > 0 and e["tokens_per_second"] > 0 for e in rounds)

    document = httpx.get(f"{server.v1}/runs/{run_id}/document")
    assert document.status_code == 200
    assert document.headers["content-type"].startswith("text/markdown")
    deltas = "".join(e["text"] for e in events if e["type"] == "delta")
    assert document.text == deltas != ""
    texts = text_by_section(events)
    folder = run_dir(out, run_id)
    for key, text in texts.items():
        assert (folder / "sections" / f"{key}.md").read_text("utf-8") == text
    assert list(texts) == ["first", "second", "third"]

    html = httpx.get(f"{server.v1}/runs/{run_id}/document", headers={"Accept": "text/html"})
    assert html.headers["content-type"].startswith("text/html")
    assert "<!doctype html>" in html.text and "<script" not in html.text

    manifest = httpx.get(f"{server.v1}/runs/{run_id}").json()
    assert manifest["status"] == "completed" and manifest["source"] == "server"
    assert [s["id"] for s in manifest["sections"]] == ["first", "second", "third"]
    assert manifest["inputs"]["topic"] == "ไทย tea 🍵"
    listed = httpx.get(f"{server.v1}/runs").json()["data"]
    assert {"run_id": run_id, "status": "completed"}.items() <= listed[0].items()
    assert (folder / "timeline.svg").is_file()
    svg = httpx.get(f"{server.v1}/runs/{run_id}/timeline.svg")
    assert svg.headers["content-type"] == "image/svg+xml" and "first" in svg.text

    # a watcher who comes after the end gets the whole replay, then the stream ends
    again = watch(server, run_id)
    assert again.events == events


def test_a_watcher_that_drops_and_reconnects_gets_every_later_event_once(
    server: Server, out: Path
) -> None:
    run_id = start(server)
    early = watch(server, run_id, stop_after=4)  # drops after four events
    assert_once_in_order(early.events, 1)
    rest = watch(server, run_id, last_id=early.events[-1]["seq"])
    assert_once_in_order(rest.events, 5)
    events = early.events + rest.events
    assert events[-1]["type"] == "run_finished"
    on_disk = [json.loads(line) for line in (run_dir(out, run_id) / "events.jsonl").open()]
    assert events == on_disk
    # the query form, for a new EventSource; and a bad id is a 400, not a stream
    tail = httpx.get(f"{server.v1}/runs/{run_id}/events?last_event_id={len(events) - 1}")
    assert tail.text.count("event: run_finished") == 1 and "event: delta" not in tail.text
    bad = httpx.get(f"{server.v1}/runs/{run_id}/events", headers={"Last-Event-ID": "x"})
    assert bad.status_code == 400 and "Last-Event-ID" in bad.json()["error"]["message"]


def test_a_gen_run_in_another_process_is_listed_and_watched_live(
    server: Server, out: Path, tmp_path: Path
) -> None:
    pipeline = tmp_path / "watched.yaml"
    pipeline.write_text(PIPELINE, encoding="utf-8")
    proc = subprocess.Popen(
        gen_command("run", str(pipeline), "--out", str(out)),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:

        def listed_running() -> str | None:
            for run in httpx.get(f"{server.v1}/runs").json()["data"]:
                if run["source"] == "cli" and run["status"] == "running":
                    return str(run["run_id"])
            return None

        wait_until(lambda: listed_running() is not None, "the gen run is listed as running")
        run_id = listed_running()
        assert run_id is not None
        sse = watch(server, run_id)  # ends when the other process has finished
        assert proc.wait(timeout=300) == 0
    finally:
        proc.kill()
    assert_once_in_order(sse.events, 1)
    assert sse.events[-1]["type"] == "run_finished" and sse.events[-1]["status"] == "completed"
    live = [e for e in sse.events if e["type"] == "delta"]
    assert live, "no text streamed"
    document = httpx.get(f"{server.v1}/runs/{run_id}/document").text
    assert document == "".join(e["text"] for e in live)
    (listed,) = [r for r in httpx.get(f"{server.v1}/runs").json()["data"] if r["run_id"] == run_id]
    assert listed["status"] == "completed" and listed["source"] == "cli"


def test_cancel_keeps_finished_sections_and_leaves_the_engine_idle(
    server: Server, out: Path
) -> None:
    run_id = start(server, LONG_SECOND)
    folder = run_dir(out, run_id)
    wait_until(lambda: (folder / "sections" / "first.md").is_file(), "the first section is done")
    first = (folder / "sections" / "first.md").read_bytes()
    r = httpx.post(f"{server.v1}/runs/{run_id}/cancel", json={})
    assert r.status_code == 200 and r.json()["status"] == "cancelled", r.text
    manifest = json.loads((folder / "manifest.json").read_text("utf-8"))
    assert manifest["status"] == "cancelled"
    sections = {s["id"]: s["status"] for s in manifest["sections"]}
    assert sections["first"] == "completed"
    assert (folder / "sections" / "first.md").read_bytes() == first
    events = watch(server, run_id).events
    assert events[-1] == {**events[-1], "type": "run_finished", "status": "cancelled"}
    wait_until(lambda: server.metrics()["gen_requests_running"] == 0, "the engine is idle")
    assert server.metrics()["gen_runs_running"] == server.metrics()["gen_runs_queued"] == 0
    assert server.metrics()["gen_kv_cache_used_bytes"] == 0
    again = httpx.post(f"{server.v1}/runs/{run_id}/cancel", json={})
    assert again.status_code == 409 and again.json()["error"]["code"] == "run_over"


def test_past_the_run_queue_a_429(server: Server) -> None:
    runs = [start(server, LONG_SECOND) for _ in range(3)]  # two places, then one in the queue
    r = httpx.post(f"{server.v1}/runs", json={"pipeline": PIPELINE})
    assert r.status_code == 429, r.text
    assert r.json()["error"]["code"] == "run_queue_full" and "Retry-After" in r.headers
    statuses = {
        run["run_id"]: run["status"] for run in httpx.get(f"{server.v1}/runs").json()["data"]
    }
    assert sorted(statuses[r] for r in runs) == ["queued", "running", "running"]
    for run_id in reversed(runs):  # the queued one first: it must not take a freed place
        assert (
            httpx.post(f"{server.v1}/runs/{run_id}/cancel", json={}, timeout=60).status_code == 200
        )
    statuses = {
        run["run_id"]: run["status"] for run in httpx.get(f"{server.v1}/runs").json()["data"]
    }
    assert {statuses[r] for r in runs} == {"cancelled"}


def test_a_bad_pipeline_is_a_422_that_names_the_place(server: Server) -> None:
    bad = PIPELINE.replace("max_tokens: 24", "max_tokens: -3")
    r = httpx.post(f"{server.v1}/runs", json={"pipeline": bad})
    assert r.status_code == 422
    error = r.json()["error"]
    assert error["code"] == "invalid_pipeline" and error["message"].startswith(
        "request.pipeline:3:"
    )
    r = httpx.post(f"{server.v1}/runs", json={"pipeline": "no-such-pipeline"})
    assert r.status_code == 422 and "no pipeline named 'no-such-pipeline'" in r.text
    escape = PIPELINE.replace('inline: "{% for', "inline: \"{% include '../../etc/passwd' %}{% for")
    r = httpx.post(f"{server.v1}/runs", json={"pipeline": escape})
    assert r.status_code == 422 and "outside the template folders" in r.text


KEY = "s3cret-key"


def test_a_killed_server_resumes_the_run_and_a_watcher_loses_nothing(tmp_path: Path) -> None:
    """The server is killed mid-run (SIGKILL: no chance to tidy up); the next one resumes
    the run, and a watcher reconnecting with Last-Event-ID gets every later event once."""
    args = ("--out", str(tmp_path), "--api-key", KEY, "--max-runs", "1")
    with running_server(*args) as first:
        denied = httpx.post(f"{first.v1}/runs", json={"pipeline": PIPELINE})
        assert denied.status_code == 401
        assert denied.json()["error"]["code"] == "invalid_api_key"
        run_id = start(first, MEDIUM_SECOND, key=KEY)
        folder = run_dir(tmp_path, run_id)
        early = watch(first, run_id, key=KEY, stop_after=1)
        # the session cookie (set with the key) lets a browser's EventSource in, GET only
        session = httpx.post(f"{first.v1}/session", headers={"Authorization": f"Bearer {KEY}"})
        assert session.status_code == 204 and "HttpOnly" in session.headers["set-cookie"]
        assert KEY not in session.headers["set-cookie"]
        jar = dict(session.cookies)
        assert httpx.get(f"{first.v1}/runs/{run_id}", cookies=jar).status_code == 200
        bad = {"gen_session": "0" * 64}
        assert httpx.get(f"{first.v1}/runs", cookies=bad).status_code == 401
        assert (
            httpx.post(f"{first.v1}/runs/{run_id}/cancel", json={}, cookies=jar).status_code == 401
        )
        assert httpx.post(f"{first.v1}/session").status_code == 401
        wait_until(lambda: (folder / "sections" / "first.md").is_file(), "a section is done")
        wait_until(
            lambda: '"section": "second", "round": 1' in (folder / "events.jsonl").read_text(),
            "the second section has text",
        )
        finished = (folder / "sections" / "first.md").read_bytes()
        first.process.kill()
        first.process.wait()
    killed_at = max(json.loads(line)["seq"] for line in (folder / "events.jsonl").open())

    with running_server(*args) as second:
        rest = watch(second, run_id, last_id=early.events[-1]["seq"], key=KEY)
        events = early.events + rest.events
        assert_once_in_order(events, 1)
        assert len(events) > killed_at
        assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "completed"
        resumed = [e for e in events if e["type"] == "run_started"]
        assert [e["resumed"] for e in resumed] == [False, True]
        assert (folder / "sections" / "first.md").read_bytes() == finished  # never rewritten
        cached = [e for e in events if e["type"] == "section_started" and e["section"] == "first"]
        assert cached[-1]["cached"] is True
        document = httpx.get(
            f"{second.v1}/runs/{run_id}/document", headers={"Authorization": f"Bearer {KEY}"}
        )
        texts = text_by_section(events)
        assert document.text == texts["first"] + texts["second"] + texts["third"]
        assert texts["first"] == finished.decode("utf-8")
