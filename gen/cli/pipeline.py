"""`gen run` and `gen validate`: the pipeline commands, with progress on stderr; and the
arguments every command that runs a pipeline file declares (`gen batch` too)."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from gen.cli.cancel import Canceller, Stopped
from gen.cli.common import add_dtype, engine_config, stdout_closed
from gen.errors import ConfigError, GenError

if TYPE_CHECKING:  # imported lazily at run time: `gen validate` loads no torch
    from gen.backends.base import Backend
    from gen.cli.stream import DocumentStream
    from gen.pipeline.run.rundir import RunDir
    from gen.pipeline.run.runner import PreparedRun
    from gen.pipeline.spec import Pipeline

RUN_EPILOG = """examples:
  gen run pipelines/quickstart.yaml
  gen run pipelines/quickstart.yaml --set topic="Solar power" --stream > guide.md
  gen run pipelines/zh-article.yaml --events - | jq -c .type
  gen run pipelines/tech-report.yaml --resume      # finish an interrupted run
"""


def add_command(sub: Any) -> None:
    r = add_pipeline_command(sub, "run", "generate a document from a pipeline", RUN_EPILOG)
    add_overrides(r, "override an input (repeatable)")
    add_pipeline_model(r)
    add_out(r)
    r.add_argument(
        "--dry-run",
        action="store_true",
        help="print every prompt as the model would get it, with token counts; load only "
        "the tokenizer and generate nothing (with --events -: one JSON object per prompt)",
    )
    r.add_argument(
        "--resume",
        action="store_true",
        help="continue the latest run of this pipeline, reusing finished sections",
    )
    r.add_argument(
        "--stream",
        action="store_true",
        help="write the document to stdout as it is generated (its path then goes to stderr)",
    )
    add_strict(r, "any section failed")
    add_dtype(r)
    r.add_argument(
        "--events",
        default=None,
        metavar="PATH|-",
        help="also write every event as JSON lines to PATH; - for stdout, which then carries "
        "only JSON lines (the document's path is in the run_finished event)",
    )
    r.set_defaults(handler=cmd_run)
    v = add_pipeline_command(sub, "validate", "check a pipeline and its templates without a model")
    add_overrides(v)
    v.set_defaults(handler=cmd_validate)


def add_pipeline_command(
    sub: Any, name: str, help: str, epilog: str | None = None, optional: bool = False
) -> argparse.ArgumentParser:
    """The parser of a command that runs a pipeline file, with the file as its argument
    (`optional` where the command also runs without one: `gen batch --openai`)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=help, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("pipeline", nargs="?" if optional else None, help="pipeline YAML file")
    return parser


def add_overrides(parser: argparse.ArgumentParser, help: str | None = None) -> None:
    """--set KEY=VALUE, repeatable; parse_overrides reads what it gathers."""
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=help
    )


def add_pipeline_model(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-m", "--model", default=None, help="model spec (default: the pipeline's)")


def add_strict(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--strict",
        action="store_true",
        help=f"exit 1 when {what} (degenerate, or truncated short of its target), after "
        "writing everything as usual; also `strict: true` in the pipeline",
    )


def add_out(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--out", default="outputs", help="output folder (default outputs/)")


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects KEY=VALUE, got {pair!r}")
        out[key.strip()] = value
    return out


def cmd_validate(args: argparse.Namespace) -> int:
    from gen.pipeline import load_pipeline
    from gen.pipeline.model_check import check_model
    from gen.pipeline.templates.trial import trial_render

    p = load_pipeline(args.pipeline, parse_overrides(args.overrides))
    trial_render(p)  # what the templates would refuse when the run renders them
    warn(check_model(p))
    n = len(p.sections)
    print(f"{args.pipeline}: ok ({n} section{'s' * (n != 1)}, model {p.model})")
    for line in [*source_notes(p), *context_notes(p)]:
        print(f"  {line}")
    return 0


def source_notes(pipeline: Pipeline) -> list[str]:
    """What the pipeline's sources came to: files, passages, and per section how many of
    the files it draws on."""
    library = pipeline._library
    if library is None or not library.documents:
        return []
    documents = library.to_json()
    passages = sum(int(d["passages"]) for d in documents)
    files = f"{len(documents)} file{'s' * (len(documents) != 1)}"
    notes = [f"sources: {files}, {passages} passage{'s' * (passages != 1)}"]
    for section in pipeline.sections:
        files = library.files.get(section.id, [])
        notes.append(f"{section.id}: passages from {len(files)} file{'s' * (len(files) != 1)}")
    return notes


def warn(warnings: list[str]) -> None:
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr, flush=True)


def context_notes(pipeline: Pipeline) -> list[str]:
    """How each section's `context:` reaches the model: where its template places it, or
    as a labelled block gen adds before the instructions."""
    from gen.pipeline.templates.render import unplaced_context

    notes = []
    for section in pipeline.sections:
        if not section.context:
            continue
        added = unplaced_context(pipeline, section)
        given = ", ".join(section.context)
        if added:
            notes.append(
                f"{section.id}: context [{given}]: {', '.join(added)} added as a labelled "
                "block before the prompt (the template does not place it)"
            )
        else:
            notes.append(f"{section.id}: context [{given}]: placed by its template")
    return notes


class Progress:
    """One line per notable event on stderr: sections, rounds, tokens, tok/s, words; at the
    end how many sections failed and why. `strict`: a failed section fails the run."""

    def __init__(self, stream: IO[str], strict: bool = False) -> None:
        self.out = stream
        self.strict = strict

    def say(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def __call__(self, ev: dict[str, Any]) -> None:
        t = ev["type"]
        if t == "run_started":
            self.say(
                f"run {ev['run_id']}: {ev['pipeline']} with {ev['model']} ({ev['backend']}, "
                f"window {ev['window']})"
            )
        elif t == "section_started":
            note = " (cached)" if ev.get("cached") else ""
            trimmed = f", trimmed {ev['trimmed_tokens']} tok" if ev.get("trimmed_tokens") else ""
            self.say(f"  > {ev['section']}: {ev.get('title', '')}{note}{trimmed}")
        elif t == "round_finished":
            self.say(
                f"    {ev['section']} round {ev['round']} [{ev['strategy']}]: "
                f"{ev['finish_reason']}, {ev['completion_tokens']} tok, "
                f"{ev['tokens_per_second']:.1f} tok/s, {ev['words']} words"
            )
        elif t == "section_finished":
            target = f"/{ev['target_words']}" if ev.get("target_words") else ""
            score = f", S_l {ev['length_score']:.1f}" if ev.get("length_score") is not None else ""
            flag = " TRUNCATED" if ev.get("truncated") else ""
            if ev.get("ended_by"):
                flag += f" ENDED BY THE SERVER ({ev['ended_by']})"
            self.say(
                f"  ✓ {ev['section']}: {ev['words']}{target} words, {ev['rounds']} round(s)"
                f"{score}{flag}"
            )
        elif t == "error":
            where = f"{ev['section']}: " if ev.get("section") else ""
            self.say(f"  ✗ {where}{ev['message']}")
        elif t == "run_finished":
            m = ev["metrics"]
            failed = failed_note(m)
            verdict = ""
            if failed and self.strict and ev["status"] == "completed":
                verdict = "; strict mode fails the run"
            self.say(
                f"{ev['status']}: {m['sections']} sections{failed}, {m['words']} words, "
                f"{m['completion_tokens']} tokens in {m['seconds']:.1f}s "
                f"({m['tokens_per_second']:.1f} tok/s){verdict}"
            )
            coherence = []
            if m.get("overlap_max") is not None:
                coherence.append(f"overlap between sections at most {m['overlap_max']:.0%}")
            if m.get("outline_followed") is not None:
                if m["outline_followed"]:
                    coherence.append("every outline item a heading, in order")
                for title in m.get("outline_missing", []):
                    coherence.append(f"no heading for outline item {title!r}")
                for title in m.get("headings_repeated", []):
                    coherence.append(f"heading {title!r} appears twice")
            if coherence:
                self.say("  " + "; ".join(coherence))


def failed_note(metrics: dict[str, Any]) -> str:
    """What the summary line says of failed sections: ", 2 failed (loops: 1, truncated: 1)",
    or nothing when none failed."""
    count = metrics.get("sections_failed", 0)
    if not count:
        return ""
    reasons = ", ".join(f"{k}: {n}" for k, n in metrics.get("failed_reasons", {}).items())
    return f", {count} failed ({reasons})" if reasons else f", {count} failed"


def json_lines(stream: IO[str]) -> Callable[[dict[str, Any]], None]:
    def write(ev: dict[str, Any]) -> None:
        stream.write(json.dumps(ev, ensure_ascii=False) + "\n")
        stream.flush()

    return write


STDOUT_CLASH = (
    "--stream and --events - both write to stdout; send the events to a file "
    "(--events events.jsonl) or leave out one of them"
)


def cmd_run(args: argparse.Namespace) -> int:
    if args.stream and args.events == "-":
        raise ConfigError(STDOUT_CLASH)
    from gen.cli.stream import DocumentStream
    from gen.pipeline import load_pipeline
    from gen.pipeline.model_check import check_model
    from gen.pipeline.run.rundir import check_events_path, check_out_dir
    from gen.pipeline.run.runner import open_pipeline_backend, prepare_run
    from gen.pipeline.templates.trial import trial_render

    # everything a user can get wrong is refused here, before the model loads
    pipeline = load_pipeline(args.pipeline, parse_overrides(args.overrides))
    trial_render(pipeline)
    check_out_dir(Path(args.out))
    check_events_path(args.events)
    warnings = check_model(pipeline, args.model)
    model = args.model or pipeline.model
    if args.dry_run:  # it plans each section with the model's tokenizer instead
        from gen.cli.dryrun import dry_run

        return dry_run(pipeline, model, as_json=args.events == "-")
    warn(warnings)
    print(f"loading {model} ...", file=sys.stderr, flush=True)
    backend = open_pipeline_backend(pipeline, model, engine_config(args))
    strict = args.strict or pipeline.strict
    subscribers: list[Callable[[dict[str, Any]], None]] = [Progress(sys.stderr, strict)]
    canceller = Canceller()
    events_file: IO[str] | None = None
    stream: DocumentStream | None = None
    try:
        events_file = open_events(args.events)
        if events_file is sys.stdout:
            subscribers.append(canceller.guard(json_lines(events_file)))
        elif events_file is not None:
            subscribers.append(json_lines(events_file))
        prepared = prepare_run(
            pipeline,
            backend,
            Path(args.out),
            model=model,
            resume=args.resume,
            subscribers=tuple(subscribers),
        )
        if args.stream:
            stream = DocumentStream(pipeline, prepared.run_dir.read_section, sys.stdout)
            prepared.events.subscribe(canceller.guard(stream))
        manifest = asyncio.run(_execute(prepared, backend, canceller))
        code = _report(args, prepared.run_dir, manifest, stream)
        return 1 if strict and manifest["metrics"]["sections_failed"] else code
    except KeyboardInterrupt:
        return _stopped("interrupted", args.pipeline, 128 + signal.SIGINT)
    except Stopped as stop:
        return _stopped(stop.how, args.pipeline, stop.code)
    except BrokenPipeError:  # the path line found no reader
        return stdout_closed()
    except OSError as exc:  # the paths passed their checks: a disk filled, a folder went away
        raise GenError(f"cannot write the run: {os_reason(exc)}") from None
    finally:
        if events_file is not None and events_file is not sys.stdout:
            events_file.close()


def open_events(target: str | None) -> IO[str] | None:
    """Where --events goes: nowhere, stdout for "-", else the file."""
    if target is None:
        return None
    return sys.stdout if target == "-" else Path(target).open("w", encoding="utf-8")


def os_reason(exc: OSError) -> str:
    """An OSError as a user reads it: what went wrong and where, no errno tuple."""
    where = f": {exc.filename}" if exc.filename else ""
    return f"{exc.strerror or exc}{where}"


def _stopped(how: str, pipeline: str, code: int) -> int:
    print(
        f"{how}: finished sections are kept; `gen run {pipeline} --resume` continues the run",
        file=sys.stderr,
    )
    return code


def _report(
    args: argparse.Namespace,
    run_dir: RunDir,
    manifest: dict[str, Any],
    stream: DocumentStream | None,
) -> int:
    """The ending: the document's path as the last stdout line, unless stdout carries the
    document (--stream) or JSON lines (--events -, whose run_finished event has the path);
    then it goes to stderr."""
    to = sys.stderr if args.stream or args.events == "-" else sys.stdout
    if manifest["status"] != "completed":
        print(
            f"run {manifest['status']}; finished sections are in {run_dir.path}; "
            f"`gen run {args.pipeline} --resume` continues it",
            file=sys.stderr,
        )
        print(run_dir.path, file=to)
        return 1
    if stream is not None and not stream.assembled:
        print(
            "--stream wrote the sections' text; the document, as the pipeline's document "
            f"template assembles it, is at {run_dir.document_path}",
            file=sys.stderr,
        )
        return 0
    print(run_dir.document_path, file=to)
    return 0


async def _execute(prepared: PreparedRun, backend: Backend, canceller: Canceller) -> dict[str, Any]:
    try:
        return await canceller.run(prepared.execute())
    finally:
        await backend.aclose()
