"""`gen run` and `gen validate`: the pipeline commands, with progress on stderr."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from gen.cli.common import add_dtype

if TYPE_CHECKING:  # imported lazily at run time: `gen validate` loads no torch
    from gen.backends.base import Backend
    from gen.pipeline.run.runner import PreparedRun

RUN_EPILOG = """examples:
  gen run pipelines/quickstart.yaml
  gen run pipelines/tech-report.yaml --set topic="Solar power" --stream > report.md
  gen run pipelines/zh-article.yaml --events - | jq .type
  gen run pipelines/tech-report.yaml --resume      # finish an interrupted run
"""


def add_command(sub: Any) -> None:
    r = sub.add_parser(
        "run",
        help="generate a document from a pipeline",
        epilog=RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("pipeline", help="pipeline YAML file")
    r.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override an input (repeatable)",
    )
    r.add_argument("-m", "--model", default=None, help="model spec (default: the pipeline's)")
    r.add_argument("-o", "--out", default="outputs", help="output folder (default outputs/)")
    r.add_argument(
        "--resume",
        action="store_true",
        help="continue the latest run of this pipeline, reusing finished sections",
    )
    r.add_argument("--stream", action="store_true", help="stream the text to stdout")
    add_dtype(r)
    r.add_argument(
        "--events",
        default=None,
        metavar="PATH|-",
        help="also write every event as JSON lines to PATH (- for stdout)",
    )
    r.set_defaults(handler=cmd_run)
    v = sub.add_parser("validate", help="check a pipeline and its templates without a model")
    v.add_argument("pipeline", help="pipeline YAML file")
    v.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    v.set_defaults(handler=cmd_validate)


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    from gen.errors import ConfigError

    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects KEY=VALUE, got {pair!r}")
        out[key.strip()] = value
    return out


def cmd_validate(args: argparse.Namespace) -> int:
    from gen.pipeline import load_pipeline

    p = load_pipeline(args.pipeline, parse_overrides(args.overrides))
    n = len(p.sections)
    print(f"{args.pipeline}: ok ({n} section{'s' * (n != 1)}, model {p.model})")
    return 0


class Progress:
    """One line per notable event on stderr: sections, rounds, tokens, tok/s, words."""

    def __init__(self, stream: IO[str]) -> None:
        self.out = stream
        self.round_started: dict[str, float] = {}
        self.run_started = time.monotonic()

    def __call__(self, ev: dict[str, Any]) -> None:
        t = ev["type"]
        if t == "run_started":
            print(
                f"run {ev['run_id']}: {ev['pipeline']} with {ev['model']} ({ev['backend']}, "
                f"window {ev['window']})",
                file=self.out,
                flush=True,
            )
        elif t == "section_started":
            self.round_started[ev["section"]] = time.monotonic()
            note = " (cached)" if ev.get("cached") else ""
            trimmed = f", trimmed {ev['trimmed_tokens']} tok" if ev.get("trimmed_tokens") else ""
            print(
                f"  > {ev['section']}: {ev.get('title', '')}{note}{trimmed}",
                file=self.out,
                flush=True,
            )
        elif t == "round_finished":
            began = self.round_started.get(ev["section"], time.monotonic())
            secs = max(1e-6, time.monotonic() - began)
            self.round_started[ev["section"]] = time.monotonic()
            tps = ev["completion_tokens"] / secs
            print(
                f"    {ev['section']} round {ev['round']} [{ev['strategy']}]: "
                f"{ev['finish_reason']}, {ev['completion_tokens']} tok, {tps:.1f} tok/s, "
                f"{ev['words']} words",
                file=self.out,
                flush=True,
            )
        elif t == "section_finished":
            target = f"/{ev['target_words']}" if ev.get("target_words") else ""
            score = f", S_l {ev['length_score']:.1f}" if ev.get("length_score") is not None else ""
            flag = " TRUNCATED" if ev.get("truncated") else ""
            print(
                f"  ✓ {ev['section']}: {ev['words']}{target} words, {ev['rounds']} round(s)"
                f"{score}{flag}",
                file=self.out,
                flush=True,
            )
        elif t == "error":
            where = f"{ev['section']}: " if ev.get("section") else ""
            print(f"  ✗ {where}{ev['message']}", file=self.out, flush=True)
        elif t == "run_finished":
            m = ev["metrics"]
            print(
                f"{ev['status']}: {m['sections']} sections, {m['words']} words, "
                f"{m['completion_tokens']} tokens in {m['seconds']:.1f}s "
                f"({m['tokens_per_second']:.1f} tok/s)",
                file=self.out,
                flush=True,
            )


class StreamPrinter:
    """--stream: the text of one section at a time, in the order sections started; text
    of sections running alongside is held until their turn."""

    def __init__(self, stream: IO[str]) -> None:
        self.out = stream
        self.order: list[str] = []
        self.buffers: dict[str, str] = {}
        self.finished: set[str] = set()
        self.head = 0

    def __call__(self, ev: dict[str, Any]) -> None:
        t = ev["type"]
        if t == "section_started":
            self.order.append(ev["section"])
            self.buffers.setdefault(ev["section"], "")
        elif t == "delta":
            self.buffers[ev["section"]] = self.buffers.get(ev["section"], "") + ev["text"]
        elif t in ("section_finished", "error") and ev.get("section"):
            self.finished.add(ev["section"])
        self._drain()

    def _drain(self) -> None:
        while self.head < len(self.order):
            key = self.order[self.head]
            text = self.buffers.get(key, "")
            if text:
                self.out.write(text)
                self.out.flush()
                self.buffers[key] = ""
            if key not in self.finished:
                return
            self.out.write("\n\n")
            self.head += 1


def json_lines(stream: IO[str]) -> Callable[[dict[str, Any]], None]:
    def write(ev: dict[str, Any]) -> None:
        stream.write(json.dumps(ev, ensure_ascii=False) + "\n")
        stream.flush()

    return write


def cmd_run(args: argparse.Namespace) -> int:
    from gen.backends import open_backend
    from gen.pipeline import load_pipeline
    from gen.pipeline.run.runner import prepare_run

    pipeline = load_pipeline(args.pipeline, parse_overrides(args.overrides))
    model = args.model or pipeline.model
    print(f"loading {model} ...", file=sys.stderr, flush=True)
    backend = open_backend(model, pipeline.base_url, pipeline.api_key_env, dtype=args.dtype)
    subscribers: list[Callable[[dict[str, Any]], None]] = [Progress(sys.stderr)]
    if args.stream:
        subscribers.append(StreamPrinter(sys.stdout))
    events_file: IO[str] | None = None
    if args.events == "-":
        subscribers.append(json_lines(sys.stdout))
    elif args.events:
        events_file = Path(args.events).open("w", encoding="utf-8")  # noqa: SIM115
        subscribers.append(json_lines(events_file))
    try:
        prepared = prepare_run(
            pipeline,
            backend,
            Path(args.out),
            model=model,
            resume=args.resume,
            subscribers=tuple(subscribers),
        )
        manifest = asyncio.run(_execute(prepared, backend))
    except KeyboardInterrupt:
        print(
            "interrupted: finished sections are kept; "
            f"`gen run {args.pipeline} --resume` continues the run",
            file=sys.stderr,
        )
        return 130
    finally:
        if events_file is not None:
            events_file.close()
    run_dir = prepared.run_dir
    if manifest["status"] != "completed":
        print(
            f"run {manifest['status']}; finished sections are in {run_dir.path}; "
            f"`gen run {args.pipeline} --resume` continues it",
            file=sys.stderr,
        )
        print(run_dir.path)
        return 1
    print(run_dir.document_path)
    return 0


async def _execute(prepared: PreparedRun, backend: Backend) -> dict[str, Any]:
    try:
        return await prepared.execute()
    finally:
        await backend.aclose()
