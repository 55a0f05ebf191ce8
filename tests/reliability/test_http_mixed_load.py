"""Mixed load on a real `gen serve` (loopback, the bundled model): 64 clients at once,
streaming chat completions, run creations, SSE watchers of those runs and plain GETs,
some of each walking away mid-answer. Every client that stays gets a whole, correct
answer or a 429 with Retry-After; afterwards the engine is idle, every accepted run is
complete, and the server's memory (RSS) is back near where it was before the load."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.reliability.soak import record
from tests.reliability.test_http_load import BODY, assert_whole_stream, engine_idle
from tests.server.conftest import Server, running_server, wait_until

pytestmark = pytest.mark.real_model

CHATS, RUNS, WATCHERS, GETS = 32, 8, 16, 8  # 64 clients
MAX_RUNS, MAX_RUN_QUEUE, MAX_WATCHERS = 2, 2, 12
ROUNDS = 3 if os.environ.get("GEN_SOAK") else 2  # the first one sets the baseline
TIMEOUT = 300  # per request: a guard against a hang
PIPELINE = """
name: loaded
defaults: {max_tokens: 12, max_rounds: 1, temperature: 0.8, seed: 3}
inputs: {topic: 茶}
sections:
  - {id: a, prompt: "One sentence about {{ topic }} in ไทย or 中文 🍵."}
document:
  inline: "{% for p in parts %}{{ p.text }}{% endfor %}"
"""
TOPICS = ("茶", "雨季 🌧", "ตลาดน้ำ", "山と川")


@dataclass
class Tally:
    """What one round's clients got, by kind."""

    chats: list[tuple[int, list[str], bool]] = field(default_factory=list)  # status, events, left
    created: list[str] = field(default_factory=list)  # run ids accepted
    refused: list[httpx.Response] = field(default_factory=list)  # the 429s
    watched: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # stayed to the end
    left_watching: int = 0
    gets: list[int] = field(default_factory=list)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    out = tmp_path_factory.mktemp("out")
    args = ["--max-model-len", "512", "--max-slots", "4", "--max-queue", "48"]
    args += ["--max-runs", str(MAX_RUNS), "--max-run-queue", str(MAX_RUN_QUEUE)]
    args += ["--max-watchers", str(MAX_WATCHERS), "--out", str(out), "--sse-ping", "1"]
    with running_server(*args) as s:
        yield s


def rss_mb(server: Server) -> float:
    """The server process's resident memory, from /proc."""
    status = Path(f"/proc/{server.process.pid}/status").read_text()
    (line,) = [x for x in status.splitlines() if x.startswith("VmRSS:")]
    return int(line.split()[1]) / 1024


async def _chat(http: httpx.AsyncClient, n: int, tally: Tally) -> None:
    async with http.stream("POST", "/v1/chat/completions", json=BODY) as r:
        events: list[str] = []
        if r.status_code != 200:
            await r.aread()
            tally.refused.append(r)
            return
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                events.append(line.removeprefix("data: "))
            if n % 4 == 0 and '"content":"' in line and '"role"' not in line:
                tally.chats.append((r.status_code, events, True))
                return  # walks away: the server must drop the sequence
        tally.chats.append((r.status_code, events, False))


async def _create(http: httpx.AsyncClient, n: int, tally: Tally, ids: asyncio.Queue[str]) -> None:
    body = {"pipeline": PIPELINE, "inputs": {"topic": TOPICS[n % len(TOPICS)]}}
    r = await http.post("/v1/runs", json=body)
    if r.status_code == 201:
        tally.created.append(r.json()["run_id"])
        for _ in range(WATCHERS):  # enough for every watcher to find one
            ids.put_nowait(r.json()["run_id"])
    else:
        tally.refused.append(r)


async def _watch(http: httpx.AsyncClient, n: int, tally: Tally, ids: asyncio.Queue[str]) -> None:
    run_id = await ids.get()
    headers = {"Accept": "text/event-stream"}
    async with http.stream("GET", f"/v1/runs/{run_id}/events", headers=headers) as r:
        if r.status_code != 200:
            await r.aread()
            tally.refused.append(r)
            return
        events: list[dict[str, Any]] = []
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line.removeprefix("data: ")))
                if n % 3 == 0 and len(events) == 2:
                    tally.left_watching += 1
                    return  # walks away mid-stream
        tally.watched[f"{run_id}/{n}"] = events


async def _get(http: httpx.AsyncClient, n: int, tally: Tally) -> None:
    path = ("/v1/runs", "/metrics", "/health", "/v1/models")[n % 4]
    tally.gets.append((await http.get(path)).status_code)


async def _round(url: str) -> Tally:
    tally = Tally()
    ids: asyncio.Queue[str] = asyncio.Queue()
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT, limits=limits) as http:
        clients = [_chat(http, n, tally) for n in range(CHATS)]
        clients += [_create(http, n, tally, ids) for n in range(RUNS)]
        clients += [_watch(http, n, tally, ids) for n in range(WATCHERS)]
        clients += [_get(http, n, tally) for n in range(GETS)]
        assert len(clients) == 64
        await asyncio.gather(*clients)
    return tally


def idle(server: Server) -> bool:
    """The engine idle, and no run generating or queued."""
    m = server.metrics()
    return engine_idle(server) and m["gen_runs_running"] == 0 and m["gen_runs_queued"] == 0


def check_round(server: Server, tally: Tally) -> None:
    for status, events, left in tally.chats:
        assert status == 200
        if not left:
            assert_whole_stream(events)
    assert sum(left for _, _, left in tally.chats) >= 1
    for r in tally.refused:
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1, r.text
        assert r.json()["error"]["code"] in ("queue_full", "run_queue_full", "too_many_watchers")
    # runs past --max-runs + --max-run-queue were refused, the rest ran to the end
    assert MAX_RUNS <= len(tally.created) <= MAX_RUNS + MAX_RUN_QUEUE + RUNS
    assert len(tally.created) < RUNS, "the run queue's cap never bit"
    assert set(tally.gets) == {200}
    wait_until(lambda: idle(server), "the engine and the runs are idle after the load")
    documents = {}
    for run_id in tally.created:
        manifest = httpx.get(f"{server.v1}/runs/{run_id}", timeout=30).json()
        assert manifest["status"] == "completed", json.dumps(manifest, ensure_ascii=False)[:3000]
        documents[run_id] = httpx.get(f"{server.v1}/runs/{run_id}/document", timeout=30).text
        assert documents[run_id].strip()
    # a watcher that stayed saw its run from the start to run_finished: its deltas joined
    # are the document, to the byte (Chinese, Thai, emoji)
    assert tally.watched, "no watcher stayed to the end"
    for key, events in tally.watched.items():
        run_id = key.split("/")[0]
        assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "completed"
        assert [e["seq"] for e in events] == sorted({e["seq"] for e in events})
        text = "".join(e["text"] for e in events if e["type"] == "delta")
        assert text.strip() and text in documents[run_id], (text, documents[run_id])


def warm_up(server: Server) -> None:
    """One chat and one run, alone: what any server has done once it has served at all
    (modules imported on first use, templates compiled, thread pools started)."""
    whole = {k: v for k, v in BODY.items() if k != "stream_options"} | {"stream": False}
    assert httpx.post(f"{server.v1}/chat/completions", json=whole, timeout=TIMEOUT).is_success
    r = httpx.post(f"{server.v1}/runs", json={"pipeline": PIPELINE}, timeout=TIMEOUT)
    assert r.status_code == 201, r.text
    wait_until(lambda: idle(server), "the warm-up run is done")


def test_mixed_clients_are_answered_and_memory_comes_back(server: Server) -> None:
    warm_up(server)
    baseline = rss_mb(server)
    rss: list[float] = []
    for n in range(ROUNDS):
        tally = asyncio.run(asyncio.wait_for(_round(server.url), timeout=4 * TIMEOUT))
        check_round(server, tally)
        record("requests served", 64)
        rss.append(rss_mb(server))
        print(f"round {n + 1}: rss {rss[-1]:.0f} MB (warm, before the load: {baseline:.0f}), "
              f"runs {len(tally.created)}, refused {len(tally.refused)}, "
              f"watchers stayed {len(tally.watched)}")  # fmt: skip
    # Past the warm baseline, a load may fill only what is bounded: the KV rows and the
    # store of prompt prefixes (their own gauges), plus allocator slack; and memory does
    # not grow from one round of the same load to the next.
    m = server.metrics()
    pools = (m["gen_kv_cache_allocated_bytes"] + m["gen_prefix_cache_bytes"]) / 2**20
    assert max(rss) - baseline <= pools + 96, (baseline, rss, pools)
    for before, after in itertools.pairwise(rss):
        assert after <= before * 1.03 + 16, rss
