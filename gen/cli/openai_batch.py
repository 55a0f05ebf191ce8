"""`gen batch --openai FILE.jsonl`: an OpenAI Batch API input file run on the local engine
(or, with `--model openai:NAME`, on a remote server), answered in OpenAI's batch output
format and resumable by custom_id; progress on stderr as `gen batch` shows it."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

import httpx

from gen.cli.batch import BatchProgress
from gen.cli.cancel import Canceller, Stopped
from gen.cli.common import default_model, engine_config
from gen.errors import ConfigError, ModelError
from gen.models import check, resolve
from gen.server.batch import (
    BatchRequest,
    Entry,
    OpenAIBatch,
    body_problem,
    local_client,
    read_requests,
    remote_client,
    succeeded,
)

CONCURRENCY = 32  # requests in flight: twice the engine's slots, so that they stay full
SHOWN_FAILURES = 20
# the options of a pipeline batch, which an OpenAI batch has no use for
PIPELINE_ONLY = {
    "pipeline": "a pipeline",
    "inputs": "--inputs",
    "key": "--key",
    "batch_id": "--batch-id",
    "overrides": "--set",
    "strict": "--strict",
}


def cmd_openai_batch(args: argparse.Namespace) -> int:
    for name, option in PIPELINE_ONLY.items():
        if getattr(args, name):
            raise ConfigError(
                f"{option} is for pipeline batches; --openai runs the requests of its file "
                f"as they are"
            )
    concurrency = CONCURRENCY if args.concurrency is None else args.concurrency
    if concurrency < 1:
        raise ConfigError(f"--concurrency must be at least 1, got {concurrency}")
    input_file = Path(args.openai)
    output, errors = output_paths(input_file, args.out)
    requests = read_requests(input_file)
    spec = args.model or default_model()
    try:  # (a bad spec, or a remote one without a server, fails before anything runs)
        model = resolve(spec)
        check(model)
    except ModelError as exc:
        raise ModelError(f"--model: {exc}") from None
    if model.kind == "openai" and not os.environ.get("OPENAI_BASE_URL"):
        raise ConfigError(f"--model {spec} needs a server: set OPENAI_BASE_URL")
    batch = OpenAIBatch(requests, input_file, output, errors)
    todo = batch.remaining(repair=not args.dry_run)  # (a dry run changes no file)
    if args.dry_run:
        return _dry_run(input_file, requests, batch.kept)
    for entry in batch.start():  # the lines that are no request
        error = entry["error"]
        print(f"{input_file}:{error['line']}: {error['message']}", file=sys.stderr)
    if batch.kept:
        print(f"{batch.kept} requests answered by an earlier run are kept", file=sys.stderr)
    failed: list[tuple[BatchRequest, Entry]] = []
    if todo:
        try:
            asyncio.run(_execute(args, spec, batch, todo, concurrency, failed))
        except KeyboardInterrupt:
            return _stopped("interrupted", args, 128 + signal.SIGINT)
        except Stopped as stop:
            return _stopped(stop.how, args, stop.code)
    batch.finish()
    return _summary(batch, todo, failed)


def output_paths(input_file: Path, out: str | None) -> tuple[Path, Path]:
    """The output file: `out`, else `<input stem>.output.jsonl` beside the input (or in
    `out` where it names a folder); the errors file beside it, `<stem>.errors.jsonl`."""
    default = f"{input_file.stem}.output.jsonl"
    if out is None:
        output = input_file.with_name(default)
    elif out.endswith(("/", os.sep)) or Path(out).is_dir():
        output = Path(out) / default
    else:
        output = Path(out)
    name = output.name
    if name.endswith(".output.jsonl"):
        stem = name.removesuffix(".output.jsonl")
    else:
        stem = name.removesuffix(".jsonl")
    errors = output.with_name(f"{stem}.errors.jsonl")
    for path in (output, errors):
        if path.resolve() == input_file.resolve():
            raise ConfigError(f"--out {out}: {path} is the input file itself")
    return output, errors


async def _execute(
    args: argparse.Namespace,
    spec: str,
    batch: OpenAIBatch,
    todo: list[BatchRequest],
    concurrency: int,
    failed: list[tuple[BatchRequest, Entry]],
) -> None:
    client, model = _client(args, spec)
    progress = BatchProgress(sys.stderr, len(todo), noun="requests")

    def started(request: BatchRequest) -> None:
        progress.started(request.custom_id or "")

    def ended(request: BatchRequest, entry: Entry) -> None:
        ok = succeeded(entry)
        if ok:
            usage = entry["response"]["body"].get("usage") or {}
            progress.tokens += int(usage.get("completion_tokens") or 0)
        else:
            failed.append((request, entry))
        progress.finished(request.custom_id or "", _line(request, entry), failed=not ok)

    async with client:  # (closing a local client closes its engine)
        try:
            await Canceller().run(batch.run(client, todo, concurrency, ended, started, model))
        finally:
            progress.close()


def _client(args: argparse.Namespace, spec: str) -> tuple[httpx.AsyncClient, str | None]:
    """The client the requests go through, and the model a body without one is sent for
    (None locally: the one model served)."""
    model = resolve(spec)
    if model.kind == "openai":
        key = os.environ.get("OPENAI_API_KEY", "")
        return remote_client(os.environ["OPENAI_BASE_URL"], key), model.remote_model

    from gen.backends.local import LocalBackend
    from gen.models import load_model

    print(f"loading {spec} ...", file=sys.stderr, flush=True)
    engine = engine_config(args)
    return local_client(LocalBackend(load_model(spec, engine), engine)), None


def _line(request: BatchRequest, entry: Entry) -> str:
    """A finished request as progress shows it: `✓ id: 8 tokens, length`, or `✗ id: 400
    messages: Field required`."""
    if succeeded(entry):
        body = entry["response"]["body"]
        tokens = (body.get("usage") or {}).get("completion_tokens", 0)
        reasons = ", ".join(str(c.get("finish_reason")) for c in body.get("choices", []))
        return f"✓ {request.custom_id}: {tokens} tokens, {reasons}"
    return f"✗ {request.custom_id}: {_problem(entry)}"


def _problem(entry: Entry) -> str:
    response = entry.get("response")
    if response is None:
        return str(entry["error"]["message"]).splitlines()[0]
    error = (response.get("body") or {}).get("error") or {}
    message = str(error.get("message", "")).splitlines()[0] if error else ""
    return f"{response['status_code']} {message}".strip()


def _summary(
    batch: OpenAIBatch, todo: list[BatchRequest], failed: list[tuple[BatchRequest, Entry]]
) -> int:
    bad_lines = sum(r.problem is not None for r in batch.requests)
    total = len(batch.requests)
    answered = batch.kept + len(todo) - len(failed)
    kept = f" ({batch.kept} by an earlier run)" if batch.kept else ""
    problems = len(failed) + bad_lines
    tail = f"; {problems} failed, see {batch.errors.path}" if problems else ""
    print(f"{answered} of {total} requests answered{kept}{tail}", file=sys.stderr)
    for request, entry in failed[:SHOWN_FAILURES]:
        print(f"  ✗ {request.custom_id} (line {request.line}): {_problem(entry)}", file=sys.stderr)
    if len(failed) > SHOWN_FAILURES:
        print(f"  … and {len(failed) - SHOWN_FAILURES} more", file=sys.stderr)
    print(batch.output.path)
    return 1 if problems else 0


def _dry_run(input_file: Path, requests: list[BatchRequest], kept: int) -> int:
    bad = 0
    for r in requests:
        problem = r.problem.message if r.problem is not None else body_problem(r)
        if problem is not None:
            bad += 1
            print(f"{input_file}:{r.line}: {problem}", file=sys.stderr)
    done = f", {kept} answered already" if kept else ""
    verdict = f", {bad} bad" if bad else ""
    print(f"{input_file}: {len(requests) - bad} of {len(requests)} requests ok{verdict}{done}")
    return 2 if bad else 0


def _stopped(how: str, args: argparse.Namespace, code: int) -> int:
    print(
        f"{how}: answered requests are kept; run the same command again "
        f"(gen batch --openai {args.openai}) to finish the rest",
        file=sys.stderr,
    )
    return code
