"""`gen serve`: the built-in engine as an OpenAI-compatible HTTP server (uvicorn)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from gen.cli.common import add_dtype, default_model, engine_config
from gen.errors import ConfigError
from gen.pipeline.run.rundir import check_out_dir

EPILOG = """examples:
  gen serve
  gen serve --port 8080 --model path/to/model.gguf
  GEN_API_KEY=secret gen serve --host 0.0.0.0 --cors-origin https://example.org

  curl http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '{"model": "smollm2-135m", "messages": [{"role": "user", "content": "Hi"}]}'
  curl http://127.0.0.1:8000/v1/runs -d '{"pipeline": "quickstart", "inputs": {"topic": "Tea"}}'
"""


def add_command(sub: Any) -> None:
    s = sub.add_parser(
        "serve",
        help="serve the engine as an OpenAI-compatible API",
        description="Serve one model over the OpenAI API (/v1/chat/completions,\n"
        "/v1/completions, /v1/models), with /health, /metrics and /openapi.json;\n"
        "run pipelines over HTTP (/v1/runs, with live progress over SSE), and watch\n"
        "them on the dashboard at /. Every request and run joins the same\n"
        "continuously batched engine.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    s.add_argument("-p", "--port", type=int, default=8000, help="port (default 8000)")
    s.add_argument(
        "-m", "--model", default=None, help="model spec (default $GEN_MODEL or smollm2-135m)"
    )
    s.add_argument(
        "--api-key",
        default=None,
        metavar="KEY",
        help="every /v1/* request needs 'Authorization: Bearer KEY' (default $GEN_API_KEY); "
        "needed to bind an address other than loopback",
    )
    s.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="allow browser requests from this origin (repeatable; '*' for any; default none)",
    )
    s.add_argument(
        "--max-slots",
        type=int,
        default=16,
        metavar="N",
        help="sequences decoded together (default 16)",
    )
    s.add_argument(
        "--max-queue",
        type=int,
        default=256,
        metavar="N",
        help="completion requests queued or running at once (default 256); past it a 429 "
        "with Retry-After, before the body is read",
    )
    s.add_argument(
        "-o",
        "--out",
        default="outputs",
        help="the outputs folder: runs started here are written there, and runs a `gen run` "
        "writes there are listed and can be watched (default outputs/)",
    )
    s.add_argument(
        "--pipelines",
        default="pipelines",
        metavar="DIR",
        help="the folder of pipelines a run may name, and the dashboard offers "
        "(default pipelines/)",
    )
    s.add_argument(
        "--max-runs",
        type=int,
        default=2,
        metavar="N",
        help="pipeline runs generating at once (default 2)",
    )
    s.add_argument(
        "--max-run-queue",
        type=int,
        default=16,
        metavar="N",
        help="runs waiting for a place (default 16); past it POST /v1/runs answers 429",
    )
    s.add_argument(
        "--max-watchers",
        type=int,
        default=256,
        metavar="N",
        help="run event streams (SSE) open at once (default 256); past it 429",
    )
    s.add_argument(
        "--sse-ping",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="keep-alive comment interval on event streams (default 15)",
    )
    s.add_argument(
        "--max-model-len",
        type=int,
        default=None,
        metavar="TOKENS",
        help="cap the context window below the model's own",
    )
    s.add_argument(
        "--max-body-mb",
        type=float,
        default=8.0,
        metavar="MB",
        help="largest request body (default 8; past it a 413)",
    )
    s.add_argument(
        "--body-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="a request body that stalls this long before its end gets a 408 (default 30)",
    )
    s.add_argument(
        "--log-level",
        default="warning",
        choices=["critical", "error", "warning", "info", "debug"],
        help="uvicorn's log level (info logs every request)",
    )
    add_dtype(s)
    s.set_defaults(handler=cmd_serve)


def _check(args: argparse.Namespace, api_key: str | None) -> None:
    from gen.server.security import is_loopback

    if not is_loopback(args.host) and not api_key:
        raise ConfigError(
            f"refusing to serve on {args.host} without an API key: anyone who can reach it "
            f"could use the model. Pass --api-key KEY (or set GEN_API_KEY), or bind 127.0.0.1"
        )
    limits = ("max_slots", "max_queue", "max_model_len", "max_runs", "max_run_queue")
    for name in ("port", *limits, "max_watchers"):
        value = getattr(args, name)
        if value is not None and value < (0 if name == "port" else 1):
            raise ConfigError(f"--{name.replace('_', '-')} must be positive, got {value}")
    if args.max_body_mb <= 0:
        raise ConfigError(f"--max-body-mb must be positive, got {args.max_body_mb}")
    if args.body_timeout <= 0:
        raise ConfigError(f"--body-timeout must be positive, got {args.body_timeout}")
    if args.sse_ping <= 0:
        raise ConfigError(f"--sse-ping must be positive, got {args.sse_ping}")
    check_out_dir(Path(args.out))


def cmd_serve(args: argparse.Namespace) -> int:
    api_key = args.api_key or os.environ.get("GEN_API_KEY") or None
    _check(args, api_key)

    import uvicorn

    from gen.backends.local import LocalBackend
    from gen.models import load_model, resolve
    from gen.server.app import create_app
    from gen.server.runs.manager import RunLimits, RunManager
    from gen.server.security import is_loopback
    from gen.server.state import ServerConfig

    spec = args.model or default_model()
    if resolve(spec).kind == "openai":
        raise ConfigError(f"gen serve runs a local model, not {spec}")
    print(f"gen serve: loading {spec} ...", file=sys.stderr, flush=True)
    engine = engine_config(args, max_slots=args.max_slots, max_model_len=args.max_model_len)
    backend = LocalBackend(load_model(spec, engine), engine)
    config = ServerConfig(
        api_key=api_key,
        cors_origins=tuple(args.cors_origin),
        max_body_bytes=int(args.max_body_mb * 2**20),
        body_timeout=args.body_timeout,
        max_queue=args.max_queue,
        fault_marker=os.environ.get("GEN_SERVE_FAULT") or None,
        loopback_only=is_loopback(args.host),
    )
    runs = RunManager(
        backend,
        Path(args.out),
        Path(args.pipelines),
        RunLimits(args.max_runs, args.max_run_queue, args.max_watchers),
        ping_seconds=args.sse_ping,
    )
    app = create_app(backend, config, runs)
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(
        f"gen serve: {backend.model} on http://{host}:{args.port}/v1, "
        f"dashboard at http://{host}:{args.port}/ "
        f"(context {backend.context_window} tokens{', API key required' if api_key else ''})",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, access_log=False)
    return 0
