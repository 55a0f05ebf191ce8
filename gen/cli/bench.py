"""`gen bench`: the engine beside Hugging Face generate(), or long-text quality."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gen.cli.common import add_dtype, default_model, engine_config


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
        help="measure long texts instead: words, S_l, distinct-4, repeated sentences",
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
        help="with --quality: only these documents, comma-separated "
        "(en-500, en-1500, zh-800, recipe-5000)",
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


def _print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def _quality_row(x: dict[str, Any], seeds: int) -> tuple[str, ...]:
    """One document's cells; over seeds, words as "512 (488–530, spread 8%)" (the mean, the
    min–max, (max-min)/mean) and a cv cell beside it."""
    words = [str(x["words"])]
    if seeds > 1:
        words = [
            f"{x['words']} ({x['words_min']}–{x['words_max']}, spread {x['words_spread']:.0%})",
            f"{x['words_cv']:.0%}",
        ]
    return (x["name"], str(x["target_words"]), *words, str(x["length_score"]),
            str(x["distinct_4"]), f"{x['repeated_sentences']:.0%}", str(x["seconds"]))  # fmt: skip


def _bench_quality(args: argparse.Namespace, note: Any) -> int:
    from pathlib import Path

    from gen.bench.quality import run_quality

    out = Path(args.out) if args.out else None
    r = run_quality(
        args.model or default_model(), note, out, engine_config(args), args.seeds, args.only
    )
    if args.json:
        print(json.dumps(r, ensure_ascii=False))
        return 0
    n = r["seeds"]
    words = ("words",) if n == 1 else (f"words ({n} seeds)", "cv")
    head = ("document", "target", *words, "S_l", "distinct-4", "repeated", "seconds")
    _print_table([head] + [_quality_row(x, n) for x in r["rows"]])
    print(f"average S_l {r['length_score_avg']}, lowest distinct-4 {r['distinct_4_min']}, "
          f"most repeated sentences {r['repeated_sentences_max']:.0%}")  # fmt: skip
    if n > 1:
        print(f"over {n} seeds: S_l, distinct-4, repeated and seconds are means; widest "
              f"spread {r['words_spread_max']:.0%}, "
              f"largest cv {r['words_cv_max']:.0%}")  # fmt: skip
    return 0


OUTLINE_CHECKS = (
    ("count", "{n} items"), ("distinct", "distinct"), ("single_line", "one-line titles"),
    ("no_generic", "no generic"), ("only_list", "only the list"), ("ok", "all"),
)  # fmt: skip


def _bench_outlines(args: argparse.Namespace, note: Any) -> int:
    from pathlib import Path

    from gen.bench.outlines import run_outlines

    out = Path(args.out) if args.out else None
    r = run_outlines(args.model or default_model(), note, out, engine_config(args))
    if args.json:
        print(json.dumps(r, ensure_ascii=False))
        return 0
    head = ("outline", *(label.format(n=r["n_parts"]) for _, label in OUTLINE_CHECKS))
    rows = [head] + [
        (mode, *(f"{s[key]}/{s['outlines']}" for key, _ in OUTLINE_CHECKS))
        for mode, s in r["summary"].items()
    ]
    _print_table(rows)
    if not r["held_by_grammar"]:
        print("this backend cannot hold a list to a grammar: held ran free as well")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from gen.bench.engine import run_bench

    def note(msg: str) -> None:
        print(f"bench: {msg} ...", file=sys.stderr, flush=True)

    if args.quality:
        return _bench_quality(args, note)
    if args.outlines:
        return _bench_outlines(args, note)

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
    s, m, c = r["single_stream"], r["mixed_batch"], r["continuation"]
    rows = [
        ("what", "gen", "baseline", "ratio"),
        (
            f"a) 1 sequence, {s['new_tokens']} tokens (tok/s, mean of {s.get('runs', 1)})",
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
    kernels = "PyTorch's kernels (gen's not built)"
    if r["kernels"]:
        kernels = f"gen's kernels ({r['isa']})"
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
    f = r["prefill"]
    print(
        f"d) a {f['prompt_tokens']}-token prompt: {f['tokens_per_second']} tok/s; time to "
        f"first token: {r['ttft_seconds']} s; peak RSS: {r['peak_rss_mb']} MB"
    )
    if "constraint" in r:
        k = r["constraint"]
        print(
            f"f) the schema costs {k['overhead_ms_per_token']} ms a token (its mask alone "
            f"{k['mask_ms_per_token']} ms; compiling it {k['schema_setup_ms']} ms a request, "
            f"reading the tokenizer {k['tokenizer_setup_seconds']} s once); a free row "
            f"alone {k['alone_tokens_per_second']} tok/s, beside the held row "
            f"{k['beside_constrained_tokens_per_second']}"
        )
    if "peers" in r:
        p = r["peers"]
        if not p["available"]:
            print(f"p) llama.cpp: not measured ({p['why']})")
        else:
            tg = f"tg{s['new_tokens']}"
            print(
                f"p) llama.cpp on the same GGUF: {tg} {p.get(tg)} tok/s, pp512 "
                f"{p.get('pp512')} tok/s (llama-bench); the mixed batch on llama-server "
                f"{p['server_mixed_seconds']} s. Ours against it: single stream "
                f"{p['single_ratio']}x (decoding: {s['decode_tokens_per_second']} tok/s after "
                f"the first token), mixed batch {p['mixed_ratio']}x, prompt "
                f"{p.get('prefill_ratio')}x"
            )
    if "quality" in r:
        q = r["quality"]
        print(
            f"e) {r['dtype']} against float32: greedy identical for {q['greedy_identical']} "
            f"of {q['prompts']} prompts ({q['tokens']} tokens; mean agreeing prefix "
            f"{q['mean_agreeing_prefix']})"
        )
        for f in q["flips"]:
            print(
                f"   flip: prompt {f['prompt']}, token {f['position']}: {f['ours']!r} against "
                f"float32's {f['float32']!r}, which float32 put {f['float32_logit_gap']} "
                "logits ahead"
            )
        for name, ppl in q["perplexity"].items():
            step = q["perplexity_decoding"][name]
            print(
                f"   perplexity, {name} text: {ppl[r['dtype']]} ({r['dtype']}) against "
                f"{ppl['float32']} (float32) as a prompt; {step[r['dtype']]} against "
                f"{step['float32']} token by token"
            )
    return 0
