"""`gen bench`: the engine beside Hugging Face generate(), or long-text quality. Its options,
the bench they pick, and the lines gen.bench.report makes of the result, printed."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gen.bench import report
from gen.cli.common import add_dtype, default_model, engine_config
from gen.errors import ConfigError


def add_command(sub: Any) -> None:
    b = sub.add_parser("bench", help="measure the engine beside Hugging Face generate()")
    b.add_argument("-m", "--model", default=None, help="model spec (default smollm2-135m)")
    b.add_argument("--json", action="store_true", help="print one JSON object")
    b.add_argument("--requests", type=int, default=32, help="requests in the mixed batch")
    b.add_argument("--tokens", type=int, default=256, help="new tokens in the single stream")
    b.add_argument(
        "--no-served",
        action="store_true",
        help="skip the figure of the mixed batch sent to a gen serve over HTTP",
    )
    b.add_argument(
        "--peers",
        action="store_true",
        help="also run llama.cpp's llama-bench and llama-server on the same GGUF "
        "(built once by `make bench-peers`) and print our ratios against them",
    )
    b.add_argument(
        "--quality",
        action="store_true",
        help="measure long texts instead: words, S_l, distinct-4, repeated sentences, and "
        "what a reader is spared or given: junk, language, chatter, relevance, failed and "
        "truncated sections, sections under S_l 80 and why",
    )
    b.add_argument(
        "--seeds",
        type=_positive,
        default=5,
        metavar="N",
        help="with --quality: run each document with N seeds and report how its length "
        "varies (default 5)",
    )
    b.add_argument(
        "--only",
        type=_quality_cases,
        default=None,
        metavar="NAMES",
        help="with --quality: only these documents, comma-separated (en-150, en-600-plan, "
        "en-1500-dialogue, en-3000, zh-400, zh-2000, recipe-5000)",
    )
    b.add_argument(
        "--reading",
        default=None,
        metavar="FILE",
        help="with --quality: a JSON object of what a reader sees in each document, by its "
        "name, written by reading them; the report prints it beside the figures",
    )
    b.add_argument(
        "--checks",
        action="store_true",
        help="replay a corpus of good writing (English and Chinese) through a section run "
        "and count how often the loop and reader checks cut it (no model needed)",
    )
    b.add_argument(
        "--corpus",
        default=None,
        metavar="DIR",
        help="with --checks: a folder of *.md documents with front matter (prompt, kind, "
        "language) in place of gen's own corpus",
    )
    b.add_argument(
        "--outlines",
        action="store_true",
        help="measure the tech-report's outline step alone over 10 topics, held to its "
        "grammar and free",
    )
    b.add_argument(
        "--out", default=None, help="with --quality or --outlines: where the documents go"
    )
    b.add_argument(
        "--pipelines",
        default="pipelines",
        metavar="DIR",
        help="with --quality or --outlines: the folder of gen's bundled pipelines, which "
        "holds long-article.yaml and tech-report.yaml (default pipelines/)",
    )
    add_dtype(b)
    b.set_defaults(handler=cmd_bench)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _quality_cases(text: str) -> list[str]:
    from gen.bench.quality import CASE_NAMES

    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in CASE_NAMES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"no document named {', '.join(unknown) or repr(text)}; "
            f"the documents are {', '.join(CASE_NAMES)}"
        )
    return names


def _check_bundled(pipelines: Path, name: str) -> None:
    """A bench's pipeline is missing from the --pipelines folder: say so before the model
    loads."""
    if not (pipelines / name).is_file():
        raise ConfigError(
            f"{pipelines / name}: no such file; --pipelines names the folder of gen's bundled "
            f"pipelines that holds {name} (default pipelines/, from the current directory)"
        )


def _bench_quality(args: argparse.Namespace, note: Callable[[str], None]) -> int:
    from gen.bench.quality import RECIPE, RECIPE_NAME, run_quality

    pipelines = Path(args.pipelines)
    if args.only is None or RECIPE_NAME in args.only:  # the others are written in code
        _check_bundled(pipelines, RECIPE)
    reading = _reading(args.reading) if args.reading else {}
    out = Path(args.out) if args.out else None
    r = run_quality(
        args.model or default_model(),
        note,
        out,
        engine_config(args),
        args.seeds,
        args.only,
        pipelines=pipelines,
    )
    for row in r["rows"]:
        row["reading"] = reading.get(row["name"])
    if args.json:
        print(json.dumps(r, ensure_ascii=False))
        return 0
    _print_lines(report.quality_lines(r))
    return 0


def _reading(path: str) -> dict[str, str]:
    """--reading's notes by document name, or a clear error."""
    try:
        notes = json.loads(Path(path).read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--reading {path}: {exc}") from None
    if not isinstance(notes, dict) or not all(isinstance(v, str) for v in notes.values()):
        raise ConfigError(f"--reading {path}: must be a JSON object of strings by document name")
    return notes


def _bench_checks(args: argparse.Namespace, note: Callable[[str], None]) -> int:
    from gen.bench.checks import cut_lines, run_checks

    r = run_checks(Path(args.corpus) if args.corpus else None, note)
    if args.json:
        print(json.dumps(r, ensure_ascii=False))
        return 0
    _print_lines(list(cut_lines(r)))
    return 0


def _bench_outlines(args: argparse.Namespace, note: Callable[[str], None]) -> int:
    from gen.bench.outlines import TECH_REPORT, run_outlines

    pipelines = Path(args.pipelines)
    _check_bundled(pipelines, TECH_REPORT)
    out = Path(args.out) if args.out else None
    r = run_outlines(
        args.model or default_model(), note, out, engine_config(args), pipelines=pipelines
    )
    if args.json:
        print(json.dumps(r, ensure_ascii=False))
        return 0
    _print_lines(report.outline_lines(r))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from gen.bench.engine import run_bench

    def note(msg: str) -> None:
        print(f"bench: {msg} ...", file=sys.stderr, flush=True)

    if args.quality:
        return _bench_quality(args, note)
    if args.outlines:
        return _bench_outlines(args, note)
    if args.checks:
        return _bench_checks(args, note)

    r = run_bench(
        args.model or default_model(),
        args.tokens,
        args.requests,
        note,
        engine_config(args),
        served=not args.no_served,
        peers=args.peers,
    )
    if args.json:
        print(json.dumps(r))
        return 0
    _print_lines(report.engine_lines(r))
    return 0


def _print_lines(lines: list[str]) -> None:
    for line in lines:
        print(line)
