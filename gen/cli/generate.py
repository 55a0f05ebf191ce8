"""`gen generate`: one chat completion streamed to stdout."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from gen.cli.common import add_dtype, default_model


def add_command(sub: Any) -> None:
    g = sub.add_parser("generate", help="stream one chat completion to stdout")
    g.add_argument("prompt", help="the user message")
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
    g.add_argument("--seed", type=int, default=None)
    g.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    g.add_argument("--json", action="store_true", help="print one JSON object instead of streaming")
    add_dtype(g)
    g.set_defaults(handler=cmd_generate)


def cmd_generate(args: argparse.Namespace) -> int:
    from gen.backends import open_backend
    from gen.engine import SamplingParams

    breakers: dict[str, Any] = {}
    if args.dry_sequence_breaker is not None:  # "\\n" on the command line is a newline
        breakers["dry_sequence_breakers"] = tuple(
            b.encode("latin-1", "backslashreplace").decode("unicode_escape")
            for b in args.dry_sequence_breaker
        )
    params = SamplingParams(
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        min_p=args.min_p,
        repetition_penalty=args.repetition_penalty,
        frequency_penalty=args.frequency_penalty,
        presence_penalty=args.presence_penalty,
        no_repeat_ngram_size=args.no_repeat_ngram_size,
        dry_multiplier=args.dry_multiplier,
        dry_base=args.dry_base,
        dry_allowed_length=args.dry_allowed_length,
        dry_penalty_last_n=args.dry_penalty_last_n,
        **breakers,
        min_tokens=args.min_tokens,
        ignore_eos=args.ignore_eos,
        seed=args.seed,
        stop=tuple(args.stop),
    )
    messages = [{"role": "user", "content": args.prompt}]
    if args.system:
        messages.insert(0, {"role": "system", "content": args.system})
    spec = args.model or default_model()
    print(f"loading {spec} ...", file=sys.stderr, flush=True)
    backend = open_backend(spec, dtype=args.dtype)

    async def go() -> dict[str, Any]:
        stream = await backend.chat(messages, params)
        text = ""
        result: dict[str, Any] = {}
        try:
            async for d in stream.deltas():
                text += d.text
                if not args.json and d.text:
                    sys.stdout.write(d.text)
                    sys.stdout.flush()
                if d.finish_reason is not None:
                    result = {
                        "text": text,
                        "finish_reason": d.finish_reason,
                        "stop_reason": d.stop_reason,
                        "usage": {
                            "prompt_tokens": d.prompt_tokens,
                            "completion_tokens": d.completion_tokens,
                            "total_tokens": d.prompt_tokens + d.completion_tokens,
                        },
                    }
        finally:
            await stream.close()
            await backend.aclose()
        return result

    result = asyncio.run(go())
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        sys.stdout.write("\n")
        u = result["usage"]
        print(
            f"finish_reason={result['finish_reason']} stop_reason={result['stop_reason']!r} "
            f"prompt_tokens={u['prompt_tokens']} completion_tokens={u['completion_tokens']}",
            file=sys.stderr,
        )
    return 0
