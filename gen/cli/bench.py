"""`gen bench`: the engine beside Hugging Face generate(), or long-text quality."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gen.cli.common import add_dtype, default_model


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
        "--quality",
        action="store_true",
        help="measure long texts instead: words, S_l, distinct-4, repeated sentences",
    )
    b.add_argument("--out", default=None, help="with --quality: where the documents go")
    add_dtype(b)
    b.set_defaults(handler=cmd_bench)


def _bench_quality(args: argparse.Namespace, note: Any) -> int:
    from pathlib import Path

    from gen.bench_quality import run_quality

    out = Path(args.out) if args.out else None
    r = run_quality(args.model or default_model(), note, out, args.dtype)
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

    r = run_bench(
        args.model or default_model(),
        args.tokens,
        args.requests,
        note,
        args.dtype,
        served=not args.no_served,
    )
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
    if "constraint" in r:
        k = r["constraint"]
        rows.append(
            (
                f"f) a JSON-schema row beside a free row, {k['new_tokens']} tokens (tok/s)",
                f"{k['constrained_tokens_per_second']}",
                f"{k['free_pair_tokens_per_second']} (2 free rows)",
                f"{k['time_ratio_vs_free']}x the time",
            )
        )
    if "served" in r:
        h = r["served"]
        rows.insert(
            3,
            (
                f"b') the same over HTTP: {h['clients']} streaming clients to gen serve (s)",
                f"{h['seconds']}",
                f"{h['in_process_seconds']} (in process)",
                f"{h['overhead_ratio']}x",
            ),
        )
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
    if "served" in r:
        h = r["served"]
        print(
            f"b') over HTTP: {h['tokens']} tokens streamed; text equal to in-process for "
            f"{h['identical']} of {h['requests']} requests"
        )
    print(f"d) time to first token: {r['ttft_seconds']} s; peak RSS: {r['peak_rss_mb']} MB")
    if "constraint" in r:
        k = r["constraint"]
        print(
            f"f) the schema costs {k['overhead_ms_per_token']} ms a token (its mask alone "
            f"{k['mask_ms_per_token']} ms; compiling it {k['schema_setup_ms']} ms a request, "
            f"reading the tokenizer {k['tokenizer_setup_seconds']} s once); a free row "
            f"alone {k['alone_tokens_per_second']} tok/s, beside the held row "
            f"{k['beside_constrained_tokens_per_second']}"
        )
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
