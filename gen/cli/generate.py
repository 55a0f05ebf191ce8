"""`gen generate`: one chat completion streamed to stdout."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gen.cli.common import add_dtype, default_model, engine_config, stdout_closed
from gen.errors import ConfigError

if TYPE_CHECKING:  # imported lazily at run time: loading the engine is slow
    from gen.backends.base import Backend, Message
    from gen.sampling import Constraint, SamplingParams


def add_command(sub: Any) -> None:
    g = sub.add_parser("generate", help="stream one chat completion to stdout")
    g.add_argument("prompt", help="the user message; - reads it from stdin")
    g.add_argument(
        "-m", "--model", default=None, help="model spec (default $GEN_MODEL or smollm2-135m)"
    )
    g.add_argument("-s", "--system", default=None, help="system message")
    g.add_argument("-n", "--max-tokens", type=int, default=256)
    g.add_argument("-t", "--temperature", type=float, default=0.7)
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--top-k", type=int, default=0)
    g.add_argument("--min-p", type=float, default=0.0)
    g.add_argument("--repetition-penalty", type=float, default=1.0)
    g.add_argument("--frequency-penalty", type=float, default=0.0, help="in [-2, 2]")
    g.add_argument("--presence-penalty", type=float, default=0.0, help="in [-2, 2]")
    g.add_argument(
        "--no-repeat-ngram-size",
        type=int,
        default=0,
        help="ban repeating any generated n-gram of this size (0: off)",
    )
    g.add_argument(
        "--dry-multiplier", type=float, default=0.0, help="DRY repetition penalty (0: off)"
    )
    g.add_argument("--dry-base", type=float, default=1.75, help="DRY growth per token (> 1)")
    g.add_argument(
        "--dry-allowed-length", type=int, default=2, help="DRY lets repeats this long pass"
    )
    g.add_argument(
        "--dry-penalty-last-n",
        type=int,
        default=0,
        help="DRY searches the last N generated tokens (0: all)",
    )
    g.add_argument(
        "--dry-sequence-breaker",
        action="append",
        default=None,
        help='DRY breaker string, escapes such as \\n understood (repeatable; default \\n : " *)',
    )
    g.add_argument("--min-tokens", type=int, default=0)
    g.add_argument("--ignore-eos", action="store_true")
    g.add_argument("--seed", type=seed_value, default=None, help="in [0, 2**63)")
    g.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    g.add_argument("--json", action="store_true", help="print one JSON object instead of streaming")
    shape = g.add_mutually_exclusive_group()
    shape.add_argument(
        "--json-schema", metavar="FILE", help="the output is JSON valid against this schema"
    )
    shape.add_argument("--regex", metavar="RE", help="the output matches this regular expression")
    shape.add_argument(
        "--grammar", metavar="FILE", help="the output follows this grammar (Lark; .gbnf: GBNF)"
    )
    add_dtype(g)
    g.set_defaults(handler=cmd_generate)


def cmd_generate(args: argparse.Namespace) -> int:
    from gen.backends import open_backend
    from gen.sampling import build_sampling_params

    breakers = None
    if args.dry_sequence_breaker is not None:
        breakers = tuple(map(unescape, args.dry_sequence_breaker))
    params = build_sampling_params(
        args,
        stop=tuple(args.stop),
        dry_sequence_breakers=breakers,
        constraint=constraint_from(args),
    )
    messages = [{"role": "user", "content": read_prompt(args.prompt)}]
    if args.system:
        messages.insert(0, {"role": "system", "content": args.system})
    spec = args.model or default_model()
    print(f"loading {spec} ...", file=sys.stderr, flush=True)
    backend = open_backend(spec, engine=engine_config(args))
    try:
        result = asyncio.run(complete(backend, messages, params, echo=not args.json))
        if args.json:
            print(json.dumps(result, ensure_ascii=False))
            return 0
        if result["text"] and not result["text"].endswith("\n"):
            sys.stdout.write("\n")
        sys.stdout.flush()  # the text and its newline before the summary, on a shared terminal
    except BrokenPipeError:
        return stdout_closed()
    print(summary(result), file=sys.stderr)
    return 0


def constraint_from(args: argparse.Namespace) -> Constraint | None:
    """--json-schema FILE, --regex RE or --grammar FILE as the engine's constraint."""
    from gen.sampling import Constraint

    if args.regex is not None:
        return Constraint("regex", args.regex)
    path, kind = (args.json_schema, "json_schema") if args.json_schema else (args.grammar, "")
    if path is None:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        option = "--json-schema" if kind else "--grammar"
        raise ConfigError(f"{option} {path}: {exc.strerror}") from None
    if kind == "json_schema":
        try:
            json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"--json-schema {path}: not JSON: {exc}") from None
    else:
        kind = "gbnf" if path.endswith(".gbnf") else "lark"
    return Constraint(kind, text)


def seed_value(text: str) -> int:
    """--seed, in the range a pipeline's seed has; the engine cannot take a larger one."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text}") from None
    if not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"must be in [0, 2**63), got {value}")
    return value


def unescape(breaker: str) -> str:
    """A --dry-sequence-breaker as meant: "\\n" on the command line is a newline."""
    try:
        return breaker.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--dry-sequence-breaker {breaker}: {exc.reason}") from None


def read_prompt(arg: str) -> str:
    """The prompt as given, or for "-" all of stdin as UTF-8, less the line breaks ending it."""
    if arg != "-":
        return arg
    try:
        text = sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"stdin: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    text = text.rstrip("\r\n")
    if not text.strip():
        raise ConfigError("stdin: the prompt is empty")
    return text


async def complete(
    backend: Backend, messages: list[Message], params: SamplingParams, *, echo: bool
) -> dict[str, Any]:
    """One completion as the --json object; with `echo`, its text goes to stdout as it comes."""
    from gen.backends.collect import collect

    def show(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    try:
        done = await collect(await backend.chat(messages, params), show if echo else None)
    finally:
        await backend.aclose()
    usage = done.usage
    del usage["prompt_tokens_details"]
    return {
        "text": done.text,
        "finish_reason": done.finish_reason,
        "stop_reason": done.stop_reason,
        "usage": usage,
    }


def summary(result: dict[str, Any]) -> str:
    """The stderr line: `finish_reason: stop, stop_reason: "###", 12 prompt + 34 completion
    tokens`; no stop_reason where there is none (the end of text), a stop token by its id."""
    parts = [f"finish_reason: {result['finish_reason']}"]
    reason = result["stop_reason"]
    if isinstance(reason, str):
        parts.append(f"stop_reason: {json.dumps(reason, ensure_ascii=False)}")
    elif reason is not None:
        parts.append(f"stop_reason: token {reason}")
    usage = result["usage"]
    parts.append(
        f"{usage['prompt_tokens']} prompt + {usage['completion_tokens']} completion tokens"
    )
    return ", ".join(parts)
