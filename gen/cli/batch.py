"""`gen batch`: a pipeline over every record of a CSV, JSONL or YAML file, or (`--openai`,
openai_batch.py) the requests of an OpenAI Batch API file, with progress on stderr (a live
display on a terminal, plain lines otherwise)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from gen.cli.cancel import Canceller, Stopped
from gen.cli.common import add_dtype, engine_config
from gen.cli.pipeline import (
    add_overrides,
    add_pipeline_command,
    add_strict,
    parse_overrides,
)
from gen.errors import ConfigError

if TYPE_CHECKING:
    from gen.pipeline.run.batch import Batch, RecordResult
    from gen.pipeline.run.events import Event

EPILOG = """examples:
  gen batch pipelines/quickstart.yaml --inputs topics.csv
  gen batch pipelines/tech-report.yaml --inputs products.jsonl --key sku --concurrency 8
  gen batch pipelines/quickstart.yaml --inputs topics.csv --dry-run   # check every record
  gen batch --openai requests.jsonl                # an OpenAI Batch API input file
  gen batch --openai requests.jsonl -o answers.jsonl -c 16

Each record's fields set the pipeline's inputs. Documents go to
OUT/<pipeline>/<batch-id>/<record-key>/ (batch id: the records file's name), with
batch.json and batch.csv beside them. Running the same command again finishes the
records that are left; finished ones are not generated again.

With --openai, each line of the file is a request as OpenAI's Batch API takes it
({"custom_id", "method": "POST", "url": "/v1/chat/completions" or "/v1/completions",
"body"}), answered as `gen serve` answers it. For requests.jsonl the answers go to
requests.output.jsonl beside it (or -o FILE), failed requests and bad lines to
requests.errors.jsonl, in OpenAI's batch output format. Running the same command again
runs only the requests the output file does not hold.
"""


def add_command(sub: Any) -> None:
    b = add_pipeline_command(
        sub,
        "batch",
        "generate one document per record of a CSV, JSONL or YAML file, or run an "
        "OpenAI Batch API file",
        EPILOG,
        optional=True,
    )
    b.add_argument("-i", "--inputs", metavar="FILE", help="records: .csv, .jsonl or .yaml")
    b.add_argument(
        "--openai",
        metavar="FILE",
        default=None,
        help="run the requests of an OpenAI Batch API input file (JSONL) instead of a "
        "pipeline: each answered as gen serve answers it, in OpenAI's batch output format",
    )
    b.add_argument(
        "--key",
        default=None,
        metavar="FIELD",
        help="the field that names each record's folder (default: the record's number)",
    )
    b.add_argument(
        "-c",
        "--concurrency",
        type=int,
        default=None,
        metavar="N",
        help="documents in flight at once (default 4); their sections share the engine. "
        "With --openai: requests in flight (default 32)",
    )
    b.add_argument(
        "-o",
        "--out",
        default=None,
        help="output folder (default outputs/); with --openai the output file (default "
        "beside the input: FILE.output.jsonl), or a folder to write it in",
    )
    b.add_argument(
        "--batch-id",
        default=None,
        metavar="ID",
        help="the batch's folder name (default: the records file's name, so that the same "
        "command resumes the same batch)",
    )
    add_overrides(b, "set an input or setting for every record (a record's own field wins)")
    b.add_argument(
        "-m",
        "--model",
        default=None,
        help="model spec (default: the pipeline's; with --openai $GEN_MODEL or "
        "smollm2-135m, or openai:NAME for the server at $OPENAI_BASE_URL)",
    )
    b.add_argument(
        "--dry-run",
        action="store_true",
        help="check every record against the pipeline (with --openai: every line and "
        "request body), load no model, generate nothing",
    )
    add_strict(b, "any record had a failed section")
    add_dtype(b)
    b.set_defaults(handler=cmd_batch)


def cmd_batch(args: argparse.Namespace) -> int:
    from gen.pipeline import load_pipeline
    from gen.pipeline.model_check import check_model
    from gen.pipeline.records import read_records
    from gen.pipeline.run.batch import Batch
    from gen.pipeline.run.rundir import check_out_dir
    from gen.text.words import slugify

    if args.openai is not None:
        from gen.cli.openai_batch import cmd_openai_batch

        return cmd_openai_batch(args)
    if args.pipeline is None or args.inputs is None:
        raise ConfigError(
            "gen batch needs a pipeline and its records (gen batch PIPELINE.yaml --inputs "
            "FILE), or an OpenAI batch file (gen batch --openai FILE.jsonl)"
        )
    args.out = args.out or "outputs"
    args.concurrency = 4 if args.concurrency is None else args.concurrency
    if args.concurrency < 1:
        raise ConfigError(f"--concurrency must be at least 1, got {args.concurrency}")
    overrides = parse_overrides(args.overrides)
    pipeline = load_pipeline(args.pipeline, overrides)
    records_path = Path(args.inputs)
    records = read_records(records_path, args.key)
    check_out_dir(Path(args.out))
    check_model(pipeline, args.model)
    batch_id = args.batch_id or slugify(records_path.stem) or "batch"
    if slugify(batch_id) != batch_id.lower() or batch_id.startswith("."):
        raise ConfigError(f"--batch-id {batch_id!r}: use letters, digits and '-'")
    folder = Path(args.out) / pipeline.name / batch_id
    model = args.model or pipeline.model
    progress = BatchProgress(sys.stderr, len(records))
    batch = Batch(
        Path(args.pipeline),
        records,
        str(records_path),
        folder=folder,
        model=model,
        concurrency=args.concurrency,
        overrides=overrides,
        key_field=args.key,
        on_event=progress.event,
        on_record=progress.record,
    )
    problems = batch.check()
    if args.dry_run:
        return _dry_run(records_path, len(records), problems)

    from gen.pipeline.run.runner import open_pipeline_backend

    if batch.remaining():  # else every record is done (or fails without one): no model
        print(f"loading {model} ...", file=sys.stderr, flush=True)
        batch.backend = open_pipeline_backend(pipeline, model, engine_config(args))
    folder.mkdir(parents=True, exist_ok=True)
    canceller = Canceller()
    try:
        results = asyncio.run(_execute(batch, canceller))
    except KeyboardInterrupt:
        return _stopped("interrupted", args, 128 + signal.SIGINT)
    except Stopped as stop:
        return _stopped(stop.how, args, stop.code)
    progress.close()
    failed = [r for r in results if r.status != "completed"]
    flawed = [r for r in results if r.status == "completed" and r.sections_failed]
    strict = args.strict or pipeline.strict
    done = len(results) - len(failed)
    verdict = "; strict mode fails the batch" if strict and flawed else ""
    print(
        f"{done} of {len(results)} records completed; {len(failed)} failed"
        + (f"; {len(flawed)} with failed sections{verdict}" if flawed else ""),
        file=sys.stderr,
    )
    for r in failed:
        print(f"  ✗ {r.key}: {(r.error or r.status).splitlines()[0]}", file=sys.stderr)
    for r in flawed:
        print(f"  ! {r.key}: {sections_failed(r)}", file=sys.stderr)
    print(folder / "batch.json")
    return 1 if failed or (strict and flawed) else 0


def sections_failed(result: RecordResult) -> str:
    """A record's failed sections, as its lines say them: "2 sections failed (loops: 1)"."""
    reasons = ", ".join(f"{k}: {n}" for k, n in result.failed_reasons.items())
    noun = "section" if result.sections_failed == 1 else "sections"
    return f"{result.sections_failed} {noun} failed" + (f" ({reasons})" if reasons else "")


async def _execute(batch: Batch, canceller: Canceller) -> list[RecordResult]:
    try:
        return await canceller.run(batch.run())
    finally:
        if batch.backend is not None:
            await batch.backend.aclose()


def _dry_run(path: Path, total: int, problems: dict[str, str]) -> int:
    for message in problems.values():
        print(message, file=sys.stderr)
    ok = total - len(problems)
    print(f"{path}: {ok} of {total} records ok" + (f", {len(problems)} bad" if problems else ""))
    return 2 if problems else 0


def _stopped(how: str, args: argparse.Namespace, code: int) -> int:
    print(
        f"{how}: finished records and sections are kept; run the same command again "
        f"(gen batch {args.pipeline} --inputs {args.inputs}) to finish the rest",
        file=sys.stderr,
    )
    return code


class BatchProgress:
    """Records (or requests: `noun`) done, running and failed, tokens/s and an ETA: a live
    line on a terminal, one line per finished one otherwise."""

    def __init__(self, out: IO[str], total: int, noun: str = "records") -> None:
        self.out = out
        self.total = total
        self.noun = noun
        self.done = self.failed = self.reused = self.tokens = 0
        self.running: set[str] = set()
        self.since = time.monotonic()
        self.live = None
        if out.isatty():
            from rich.console import Console
            from rich.live import Live

            self.live = Live(console=Console(file=out), refresh_per_second=4, transient=True)
            self.live.start()

    def event(self, result: RecordResult, ev: Event) -> None:
        if ev["type"] == "run_started":
            self.running.add(result.key)
        elif ev["type"] == "round_finished":
            self.tokens += int(ev.get("completion_tokens", 0))
        self._refresh()

    def record(self, result: RecordResult) -> None:
        if result.status == "completed":
            how = "kept from an earlier run" if result.reused else f"{result.words} words"
            score = f", S_l {result.length_score}" if result.length_score is not None else ""
            line = f"  ✓ {result.key}: {how}{score if not result.reused else ''}"
            if result.sections_failed:
                line += f", {sections_failed(result)}"
        else:
            line = f"  ✗ {result.key}: {(result.error or result.status).splitlines()[0]}"
        self.finished(result.key, line, result.status != "completed", result.reused)

    def started(self, key: str) -> None:
        self.running.add(key)
        self._refresh()

    def finished(self, key: str, line: str, failed: bool, reused: bool = False) -> None:
        """One done: its line, numbered, with the rates so far."""
        self.running.discard(key)
        self.done += 1
        self.failed += failed
        self.reused += reused
        self._print(f"[{self.done}/{self.total}] {line.strip()} {self._rates()}")
        self._refresh()

    def _rates(self) -> str:
        seconds = max(1e-6, time.monotonic() - self.since)
        made = self.done - self.reused
        left = self.total - self.done
        eta = ""
        if made and left:
            eta = f", ETA {_duration(seconds / made * left)}"
        return f"({self.tokens / seconds:.1f} tok/s{eta})"

    def _print(self, line: str) -> None:
        if self.live is not None:
            self.live.console.print(line, markup=False, highlight=False)
        else:
            print(line, file=self.out, flush=True)

    def _refresh(self) -> None:
        if self.live is None:
            return
        from rich.text import Text

        status = (
            f"{self.done}/{self.total} {self.noun} done · {len(self.running)} running · "
            f"{self.failed} failed {self._rates()}"
        )
        self.live.update(Text(status))

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
