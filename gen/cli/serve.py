"""`gen serve`: the built-in engine as an OpenAI-compatible HTTP server (uvicorn)."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gen.cli.common import add_dtype, default_model, engine_config
from gen.errors import ConfigError

if TYPE_CHECKING:
    from gen.server.config import ServerConfig

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


# the settings that serve's options give under another name (the rest: --max-runs, max_runs)
_OPTIONS = {"max_body_bytes": "max_body_mb", "max_waiting": "max_run_queue"}


def _config(args: argparse.Namespace) -> ServerConfig:
    """The server's settings from the options (and GEN_API_KEY); a bad one is named by its
    option. The engine's options are checked here too, before anything loads."""
    from gen.server.config import RunLimits, ServerConfig, SettingError

    try:
        config = ServerConfig.from_env(
            host=args.host,
            port=args.port,
            api_key=args.api_key,
            cors_origins=tuple(args.cors_origin),
            max_queue=args.max_queue,
            max_body_bytes=_bytes(args.max_body_mb),
            body_timeout=args.body_timeout,
            out=Path(args.out),
            pipelines=Path(args.pipelines),
            runs=RunLimits(args.max_runs, args.max_run_queue, args.max_watchers),
            sse_ping=args.sse_ping,
        )
    except SettingError as exc:
        name = _OPTIONS.get(exc.name, exc.name)
        value = getattr(args, name)
        raise ConfigError(f"--{name.replace('_', '-')} {exc.rule}, got {value}") from None
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    for name in ("max_slots", "max_model_len"):  # the engine's
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be positive, got {value}")
    from gen.pipeline.run.rundir import check_out_dir  # (not at import: every command pays it)

    check_out_dir(config.out)
    return config


def _bytes(megabytes: float) -> int:
    """--max-body-mb in bytes (-1, which the config refuses, for nan and inf)."""
    return int(megabytes * 2**20) if math.isfinite(megabytes) else -1


def cmd_serve(args: argparse.Namespace) -> int:
    config = _config(args)

    import uvicorn

    from gen.backends.local import LocalBackend
    from gen.models import load_model, resolve
    from gen.server.app import create_app
    from gen.server.runs.manager import RunManager

    spec = args.model or default_model()
    if resolve(spec).kind == "openai":
        raise ConfigError(f"gen serve runs a local model, not {spec}")
    print(f"gen serve: loading {spec} ...", file=sys.stderr, flush=True)
    engine = engine_config(args, max_slots=args.max_slots, max_model_len=args.max_model_len)
    backend = LocalBackend(load_model(spec, engine), engine)
    runs = RunManager(
        backend, config.out, config.pipelines, config.runs, ping_seconds=config.sse_ping
    )
    app = create_app(backend, config, runs)
    host = f"[{config.host}]" if ":" in config.host else config.host
    print(
        f"gen serve: {backend.model} on http://{host}:{config.port}/v1, "
        f"dashboard at http://{host}:{config.port}/ (context {backend.context_window} "
        f"tokens{', API key required' if config.api_key else ''})",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.run(app, host=config.host, port=config.port, log_level=args.log_level, access_log=False)
    return 0
