"""`gen` commands. The only module that prints for the user or exits the process."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from gen.errors import GenError

EPILOG = """examples:
  gen run pipelines/quickstart.yaml --stream
  gen run pipelines/tech-report.yaml --set topic="The printing press"
  gen validate pipelines/zh-article.yaml
  gen generate "Translate to Chinese: Good morning." --temperature 0
  gen models prepare smollm2-135m
"""


def _quiet_libraries() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _default_model() -> str:
    return os.environ.get("GEN_MODEL", "smollm2-135m")


def build_parser() -> argparse.ArgumentParser:
    from gen import cli_pipeline

    p = argparse.ArgumentParser(
        prog="gen",
        description="Declarative long-document generation with a built-in decode engine.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

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
    cli_pipeline.add_dtype(g)

    m = sub.add_parser("models", help="list or prepare models")
    m.add_argument("action", nargs="?", choices=["list", "prepare"], default="list")
    m.add_argument("spec", nargs="?", default=None, help="model spec for prepare")

    b = sub.add_parser("bench", help="measure the engine beside Hugging Face generate()")
    b.add_argument("-m", "--model", default=None, help="model spec (default smollm2-135m)")
    b.add_argument("--json", action="store_true", help="print one JSON object")
    b.add_argument("--requests", type=int, default=32, help="requests in the mixed batch")
    b.add_argument("--tokens", type=int, default=256, help="new tokens in the single stream")
    b.add_argument(
        "--quality",
        action="store_true",
        help="measure long texts instead: words, S_l, distinct-4, repeated sentences",
    )
    b.add_argument("--out", default=None, help="with --quality: where the documents go")
    cli_pipeline.add_dtype(b)

    cli_pipeline.add_commands(sub)
    return p


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
    spec = args.model or _default_model()
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


def cmd_models(args: argparse.Namespace) -> int:
    from gen.models import BUNDLED_NAME, gen_home, prepare, resolve
    from gen.models.store import cached_models

    if args.action == "prepare":
        spec = args.spec or _default_model()
        print(
            f"preparing {spec} (a GGUF is converted once; this can take a minute) ...",
            file=sys.stderr,
        )
        path = prepare(resolve(spec))
        print(path)
        return 0
    try:
        bundled = str(resolve(BUNDLED_NAME).path)
    except GenError as exc:
        bundled = f"unavailable: {exc}"
    print(f"{BUNDLED_NAME}\t(bundled) {bundled}")
    for path in cached_models():
        print(f"{path.name}\t(converted) {path}")
    print(f"# cache: {gen_home() / 'models'}", file=sys.stderr)
    return 0


def _bench_quality(args: argparse.Namespace, note: Any) -> int:
    from pathlib import Path

    from gen.bench_quality import run_quality

    out = Path(args.out) if args.out else None
    r = run_quality(args.model or _default_model(), note, out, args.dtype)
    if args.json:
        print(json.dumps(r, ensure_ascii=False))
        return 0
    head = ("document", "target", "words", "S_l", "distinct-4", "repeated", "seconds")
    rows = [head] + [
        (x["name"], str(x["target_words"]), str(x["words"]), str(x["length_score"]),
         str(x["distinct_4"]), f"{x['repeated_sentences']:.0%}", str(x["seconds"]))
        for x in r["rows"]
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    print(f"average S_l {r['length_score_avg']}, lowest distinct-4 {r['distinct_4_min']}, "
          f"most repeated sentences {r['repeated_sentences_max']:.0%}")  # fmt: skip
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from gen.bench import run_bench

    def note(msg: str) -> None:
        print(f"bench: {msg} ...", file=sys.stderr, flush=True)

    if args.quality:
        return _bench_quality(args, note)

    r = run_bench(args.model or _default_model(), args.tokens, args.requests, note, args.dtype)
    if args.json:
        print(json.dumps(r))
        return 0
    s, m, c = r["single_stream"], r["mixed_batch"], r["continuation"]
    rows = [
        ("what", "gen", "baseline", "ratio"),
        (
            f"a) 1 sequence, {s['new_tokens']} tokens (tok/s)",
            f"{s['tokens_per_second']}",
            f"{s['hf_tokens_per_second']} (HF)",
            f"{s['ratio_vs_hf']}x",
        ),
        (
            f"b) {m['requests']} requests, {m['max_tokens'][0]}..{m['max_tokens'][1]} tokens (s)",
            f"{m['seconds']}",
            f"{m['hf_seconds']} (HF static)",
            f"{m['ratio_vs_hf']}x",
        ),
        (
            f"c) {c['prompt_tokens']}-token prompt, 1+{c['continuation_rounds']} rounds "
            f"x {c['round_tokens']} (s)",
            f"{c['seconds']} (kv)",
            f"{c['reprefill_seconds']} (re-prefill)",
            f"{c['ratio_vs_reprefill']}x",
        ),
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    kernels = "gen's kernels" if r["kernels"] else "PyTorch's kernels (gen's not built)"
    print(f"# {r['model']}, dtype {r['dtype']}, {r['threads']} threads, {kernels}; HF in float32")
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
    bi = r["batch_invariance"]
    print(
        f"greedy tokens identical to HF: {s['identical_tokens']} "
        f"(first {s['agreeing_prefix']} agree); kv = re-prefill tokens: {c['same_tokens']}; "
        f"batched = alone: {bi['identical']} of {bi['requests']} requests"
    )
    print(
        f"b) prompt tokens {m['prompt_tokens']}, of which copied from a shared prefix "
        f"(the chat template's system prompt): {m['prefix_reused_tokens']}"
    )
    print(f"d) time to first token: {r['ttft_seconds']} s; peak RSS: {r['peak_rss_mb']} MB")
    if "quality" in r:
        q = r["quality"]
        print(
            f"e) {r['dtype']} against float32: greedy identical for {q['greedy_identical']} "
            f"of {q['prompts']} prompts ({q['tokens']} tokens; mean agreeing prefix "
            f"{q['mean_agreeing_prefix']})"
        )
        for name, ppl in q["perplexity"].items():
            step = q["perplexity_decoding"][name]
            print(
                f"   perplexity, {name} text: {ppl[r['dtype']]} ({r['dtype']}) against "
                f"{ppl['float32']} (float32) as a prompt; {step[r['dtype']]} against "
                f"{step['float32']} token by token"
            )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    _quiet_libraries()
    parser = build_parser()
    args = parser.parse_args(argv)
    handlers = {"generate": cmd_generate, "models": cmd_models, "bench": cmd_bench}
    from gen import cli_pipeline

    handlers.update(cli_pipeline.HANDLERS)
    try:
        return handlers[args.command](args)
    except GenError as exc:
        print(f"error: {exc}" if not getattr(exc, "location", "") else str(exc), file=sys.stderr)
        return exc.exit_code
    except ValueError as exc:  # invalid settings from the command line
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
