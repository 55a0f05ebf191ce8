"""/metrics in Prometheus text form: the engine's state as of its last step, token counters
and per-request timings. Each app has its own registry."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

if TYPE_CHECKING:
    from gen.engine.engine import EngineStats

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_SECONDS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320)


class Metrics:
    def __init__(self, model: str, stats: Callable[[], EngineStats]) -> None:
        self.registry = CollectorRegistry()
        self._stats = stats
        r, labels = self.registry, ["model"]

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, labels, registry=r)

        self.running = gauge("gen_requests_running", "Requests the engine runs this step")
        self.waiting = gauge("gen_requests_waiting", "Requests queued for a slot or KV memory")
        self.in_flight = gauge(
            "gen_http_requests_in_flight", "Completion requests admitted and not yet answered"
        )
        self.kv_used = gauge("gen_kv_cache_used_bytes", "KV memory the live sequences hold")
        self.kv_allocated = gauge("gen_kv_cache_allocated_bytes", "KV memory allocated")
        self.prefix = gauge("gen_prefix_cache_bytes", "KV memory kept for prompt prefixes")
        self.runs_running = gauge("gen_runs_running", "Pipeline runs generating")
        self.runs_queued = gauge("gen_runs_queued", "Pipeline runs waiting for a place")

        def counter(name: str, doc: str, *more: str) -> Counter:
            return Counter(name, doc, [*labels, *more], registry=r)

        self.prompt_tokens = counter("gen_prompt_tokens", "Prompt tokens of finished requests")
        self.cached_tokens = counter(
            "gen_cached_prompt_tokens", "Prompt tokens copied from a cached prefix"
        )
        self.generated_tokens = counter("gen_generation_tokens", "Tokens generated")
        self.requests = counter("gen_requests", "Finished requests", "finish_reason")
        self.rejected = counter("gen_requests_rejected", "Requests refused: the queue was full")
        self.ttft = Histogram(
            "gen_time_to_first_token_seconds",
            "From admission to the first streamed text",
            labels,
            buckets=_SECONDS,
            registry=r,
        )
        self.latency = Histogram(
            "gen_request_latency_seconds",
            "From admission to the last token",
            labels,
            buckets=_SECONDS,
            registry=r,
        )
        self.model = model

    def finished(
        self,
        finish_reason: str,
        prompt: int,
        cached: int,
        completion: int,
        ttft: float | None,
        latency: float,
    ) -> None:
        m = self.model
        self.prompt_tokens.labels(m).inc(prompt)
        self.cached_tokens.labels(m).inc(cached)
        self.generated_tokens.labels(m).inc(completion)
        self.requests.labels(m, finish_reason).inc()
        if ttft is not None:
            self.ttft.labels(m).observe(ttft)
        self.latency.labels(m).observe(latency)

    def aborted(self) -> None:
        self.requests.labels(self.model, "abort").inc()

    def render(self, in_flight: int, runs: tuple[int, int] = (0, 0)) -> bytes:
        """The text exposition; `runs`: pipeline runs (generating, queued)."""
        s, m = self._stats(), self.model
        self.runs_running.labels(m).set(runs[0])
        self.runs_queued.labels(m).set(runs[1])
        self.running.labels(m).set(s.running)
        self.waiting.labels(m).set(s.waiting)
        self.in_flight.labels(m).set(in_flight)
        self.kv_used.labels(m).set(s.kv_used_bytes)
        self.kv_allocated.labels(m).set(s.kv_allocated_bytes)
        self.prefix.labels(m).set(s.prefix_cache_bytes)
        return generate_latest(self.registry)
