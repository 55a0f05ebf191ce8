"""The runs API's edges with a scripted backend, in process (fast): runs a dead writer
left behind, what may not be resumed or fetched yet, ids that would leave the outputs
folder, the pipelines listing, the cookie that only a GET may use, Accept negotiation."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from gen.pipeline.run.events import EventLog, read_events
from gen.server.app import create_app
from gen.server.config import RunLimits, ServerConfig
from gen.server.errors import APIError
from gen.server.runs.documents import wants_html
from gen.server.runs.manager import RunManager
from tests.pipeline.fake_backend import FakeBackend
from tests.server.fakes import FakeServed

ONE_AND_ONE = RunLimits(1, 1)  # one run generating, one waiting
Call = Callable[[httpx.AsyncClient, RunManager], Awaitable[Any]]

TINY = """
name: tiny
defaults: {max_tokens: 20, max_rounds: 1}
inputs: {topic: 茶}
sections:
  - {id: a, prompt: "[a] About {{ topic }}."}
"""


def serve(
    tmp_path: Path,
    call: Call,
    api_key: str | None = None,
    limits: RunLimits = ONE_AND_ONE,
    backend: FakeBackend | None = None,
) -> Any:
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir(exist_ok=True)
    (pipelines / "tiny.yaml").write_text("# A tiny one.\n" + TINY, encoding="utf-8")
    (pipelines / "broken.yaml").write_text("name: broken\nsections: 3\n", encoding="utf-8")
    runs = RunManager(
        backend or FakeBackend(), tmp_path / "out", pipelines, limits, poll_seconds=0.01
    )
    app = create_app(FakeServed(), ServerConfig(api_key=api_key), runs)

    async def go() -> Any:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await call(client, runs)

    return asyncio.run(go())


async def finished(runs: RunManager) -> None:
    while runs.runs:
        await asyncio.sleep(0.01)


def dead_cli_run(out: Path, status: str = "running") -> Path:
    """What a `gen run` killed mid-run leaves: a manifest that says running, no lock."""
    folder = out / "tiny" / "20261202-010203-abcdef"
    (folder / "sections").mkdir(parents=True)
    manifest = {"pipeline": "tiny", "run_id": folder.name, "status": status, "sections": []}
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    log = EventLog(folder.name, folder / "events.jsonl")
    log.emit("run_started", pipeline="tiny")
    log.emit("delta", section="a", round=1, text="半")
    log.close()
    old = os.stat(folder / "events.jsonl").st_mtime - 60
    os.utime(folder / "events.jsonl", (old, old))
    return folder


def test_a_run_whose_writer_died_is_settled_as_failed(tmp_path: Path) -> None:
    folder = dead_cli_run(tmp_path / "out")

    async def call(client: httpx.AsyncClient, runs: RunManager) -> Any:
        listed = (await client.get("/v1/runs")).json()["data"]
        stream = await client.get(f"/v1/runs/{folder.name}/events", params={"last_event_id": 1})
        resume = await client.post(f"/v1/runs/{folder.name}/resume", json={})
        return listed, stream, resume

    listed, stream, resume = serve(tmp_path, call)
    assert [(r["run_id"], r["status"], r["source"]) for r in listed] == [
        (folder.name, "failed", "cli")
    ]
    manifest = json.loads((folder / "manifest.json").read_text("utf-8"))
    assert manifest["status"] == "failed" and manifest["interrupted"] is True
    types = [e["type"] for e in read_events(folder / "events.jsonl")]
    assert types == ["run_started", "delta", "error", "run_finished"]
    # the stream replays after event 1, then ends: the run is over
    assert stream.text.count("event: ") == 3 and "event: run_finished" in stream.text
    assert resume.status_code == 409 and "gen run <pipeline> --resume" in resume.text


def test_a_run_over_http_in_process_and_what_is_refused(tmp_path: Path) -> None:
    async def call(client: httpx.AsyncClient, runs: RunManager) -> Any:
        got: dict[str, Any] = {}
        r = await client.post("/v1/runs", json={"pipeline": "tiny", "inputs": {"topic": "ไทย"}})
        run_id = r.json()["run_id"]
        got["created"] = r
        got["queue"] = [
            (await client.post("/v1/runs", json={"pipeline": "tiny"})).status_code for _ in range(2)
        ]  # one waits for the place, the next is past the queue
        await finished(runs)
        got["manifest"] = (await client.get(f"/v1/runs/{run_id}")).json()
        got["md"] = await client.get(f"/v1/runs/{run_id}/document")
        got["html"] = await client.get(
            f"/v1/runs/{run_id}/document", headers={"Accept": "text/html,*/*;q=0.8"}
        )
        got["resume"] = await client.post(f"/v1/runs/{run_id}/resume", json={})
        got["form"] = await client.post(f"/v1/runs/{run_id}/cancel", data={"a": "b"})
        got["escape"] = await client.get("/v1/runs/..%2F..%2Fetc/events")
        got["pipelines"] = (await client.get("/v1/pipelines")).json()["data"]
        got["extra"] = await client.post("/v1/runs", json={"pipeline": "tiny", "model": "x"})
        return got

    got = serve(tmp_path, call)
    assert got["created"].status_code == 201
    assert got["queue"] == [201, 429]
    assert got["manifest"]["status"] == "completed" and got["manifest"]["inputs"]["topic"] == "ไทย"
    assert got["md"].text == "# tiny\n\n## A\n\nText of a.\n"
    assert got["md"].headers["content-type"] == "text/markdown; charset=utf-8"
    assert "<h2>A</h2>" in got["html"].text
    assert got["resume"].status_code == 409 and got["resume"].json()["error"]["code"] == "run_over"
    assert got["escape"].status_code == 404
    assert got["form"].status_code == 415  # what another site's form could send
    tiny, broken = sorted(got["pipelines"], key=lambda p: p["name"] != "tiny")
    assert tiny == {
        "name": "tiny",
        "file": "tiny.yaml",
        "description": "A tiny one.",
        "inputs": {"topic": "茶"},
        "sections": ["a"],
        "error": None,
    }
    assert broken["error"].startswith("broken.yaml:2:")
    assert got["extra"].status_code == 400  # an unknown field of the body


def test_the_session_cookie_opens_a_get_but_never_a_post(tmp_path: Path) -> None:
    async def call(client: httpx.AsyncClient, runs: RunManager) -> Any:
        made = await client.post("/v1/session", headers={"Authorization": "Bearer kéy".encode()})
        token = made.cookies["gen_session"]
        # another site's cookie on the same host, which http.cookies would choke on
        client.cookies.clear()
        header = {"Cookie": f'jupyter=a b; x={{"a": 1}}; gen_session={token}'}
        get = await client.get("/v1/runs", headers=header)
        post = await client.post("/v1/runs", json={"pipeline": "tiny"}, headers=header)
        page = await client.get("/")
        return made, get, post, page

    made, get, post, page = serve(tmp_path, call, api_key="kéy")
    assert made.status_code == 204 and "httponly" in made.headers["set-cookie"].lower()
    assert get.status_code == 200
    assert post.status_code == 401 and post.json()["error"]["code"] == "invalid_api_key"
    assert page.status_code == 200 and "/static/app.js" in page.text  # the page needs no key


@pytest.mark.parametrize(
    ("accept", "html"),
    [
        ("text/html", True),
        ("text/html,application/xhtml+xml,*/*;q=0.8", True),
        ("text/markdown", False),
        ("", False),
        ("*/*", False),
        ("text/markdown, text/html;q=0.5", False),
        ("text/html;q=0", False),
    ],
)
def test_accept_picks_html_only_when_preferred(accept: str, html: bool) -> None:
    assert wants_html(accept) is html


def test_junk_in_the_outputs_folder_breaks_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    fifo = out / "tiny" / "20261202-000001-aaaaaa"
    fifo.mkdir(parents=True)
    os.mkfifo(fifo / "events.jsonl")  # reading it would block the server
    (fifo / "manifest.json").write_text("[1]", encoding="utf-8")  # JSON, not a manifest
    odd = out / "tiny" / "20261202-000002-bbbbbb"
    odd.mkdir()
    (odd / "manifest.json").write_text('{"status": "completed", "sections": "xy", "metrics": [1]}')
    (out / "tiny" / "not a run").mkdir()
    (out / "stray.txt").write_text("x")

    async def call(client: httpx.AsyncClient, runs: RunManager) -> Any:
        listed = await client.get("/v1/runs")
        one = await client.get(f"/v1/runs/{fifo.name}")
        svg = await client.get(f"/v1/runs/{fifo.name}/timeline.svg")
        return listed, one, svg

    listed, one, svg = serve(tmp_path, call)
    assert listed.status_code == 200
    assert [r["run_id"] for r in listed.json()["data"]] == [odd.name, fifo.name]
    assert one.status_code == 200 and svg.status_code == 200


@pytest.mark.parametrize(
    ("host", "ok"),
    [
        ("127.0.0.1:8000", True),
        ("localhost:8000", True),
        ("[::1]:8000", True),
        ("app.localhost", True),
        ("evil.example:8000", False),
        ("", False),
    ],
)
def test_on_loopback_only_loopback_host_names(host: str, ok: bool) -> None:
    app = create_app(FakeServed(), ServerConfig(loopback_only=True))

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
            return await client.get("/health", headers={"Host": host})

    r = asyncio.run(go())
    assert (r.status_code == 200) is ok, r.text


def test_event_streams_past_max_watchers_get_a_429_until_one_closes(tmp_path: Path) -> None:
    folder = dead_cli_run(tmp_path / "out")
    url = f"/v1/runs/{folder.name}/events"

    async def call(client: httpx.AsyncClient, runs: RunManager) -> Any:
        got: dict[str, Any] = {}
        release = runs.watcher_place()  # another stream holds the only place
        got["full"] = await client.get(url)
        release()
        release()  # a second release gives nothing back twice
        got["watchers_after_release"] = runs.watchers
        got["open"] = await client.get(url)  # replays, then ends: the run is over
        got["watchers_after_stream"] = runs.watchers
        return got

    got = serve(tmp_path, call, limits=RunLimits(1, 1, max_watchers=1))
    full = got["full"]
    assert full.status_code == 429 and full.headers["retry-after"] == "5"
    error = full.json()["error"]
    assert error["code"] == "too_many_watchers" and "--max-watchers" in error["message"]
    assert got["watchers_after_release"] == 0
    assert got["open"].status_code == 200 and "event: run_finished" in got["open"].text
    assert got["watchers_after_stream"] == 0


def test_a_watcher_place_comes_back_however_the_stream_ends(tmp_path: Path) -> None:
    import gc

    from gen.server.runs.events import held

    runs = RunManager(FakeBackend(), tmp_path, tmp_path, RunLimits(max_watchers=2))

    async def events() -> AsyncIterator[str]:
        yield "一"
        yield "二"

    async def go() -> list[Any]:
        read = held(events(), runs.watcher_place())
        items = [item async for item in read]  # to its end
        ended = runs.watchers
        left = held(events(), runs.watcher_place())
        await left.__anext__()
        await left.aclose()  # the client went away mid-stream
        return [items, ended, runs.watchers]

    assert asyncio.run(go()) == [["一", "二"], 0, 0]
    never = held(events(), runs.watcher_place())  # answered, but never started
    other = runs.watcher_place()
    with pytest.raises(APIError) as full:
        runs.watcher_place()
    assert full.value.status == 429 and runs.watchers == 2
    del never
    gc.collect()
    assert runs.watchers == 1
    other()
    assert runs.watchers == 0


def test_a_prompt_that_leaves_no_room_for_the_reserve_is_a_422_not_a_failed_run(
    tmp_path: Path,
) -> None:
    """The check at POST counts the context's reserve as the run does: a pipeline whose
    instructions fit the window but not beside the reserve is refused then and there."""

    async def call(client: httpx.AsyncClient, runs: RunManager) -> Any:
        return await client.post("/v1/runs", json={"pipeline": "tiny"}), runs.runs

    # the fake counts a character a token: the prompt's 13 fit in 262, not beside 256
    r, queued = serve(tmp_path, call, backend=FakeBackend(context_window=262))
    assert r.status_code == 422, r.text
    assert "window minus reserve" in r.json()["error"]["message"] and not queued
    assert not list((tmp_path / "out").glob("*/*"))  # no run directory was made


def test_a_template_past_the_sandbox_limits_is_a_422_that_names_the_place(
    tmp_path: Path,
) -> None:
    """The check at POST renders the templates as `gen validate` does: a loop over a
    billion numbers is refused there, not when the run reaches it."""
    pipeline = TINY.replace("About {{ topic }}.", "{% for i in range(10**9) %}茶{% endfor %}")

    async def call(client: httpx.AsyncClient, runs: RunManager) -> Any:
        return await client.post("/v1/runs", json={"pipeline": pipeline}), runs.runs

    r, queued = serve(tmp_path, call)
    assert r.status_code == 422, r.text
    message = r.json()["error"]["message"]
    assert message.startswith("request.pipeline:6:")
    assert "blocked by the template sandbox: range() of 1,000,000,000 numbers" in message
    assert not queued and not list((tmp_path / "out").glob("*/*"))
