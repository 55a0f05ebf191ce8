"""The benches' results as a reader gets them: rows, text tables and the lines below them.
Takes the dicts `run_bench`, `run_quality` and `run_outlines` return; prints nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Row = tuple[str, ...]

ENGINE_HEAD: Row = ("what", "gen", "baseline", "ratio")
# a row of the engine's table, in order, where its figures are: (the result's key, its cells,
# each formatted with that part's figures); a part the bench did not measure has no row
ENGINE_ROWS = (
    ("single_stream", "a) 1 sequence, {new_tokens} tokens (tok/s, mean of {runs})",
     "{tokens_per_second}", "{hf_tokens_per_second} (HF)", "{ratio_vs_hf}x"),
    ("mixed_batch", "b) {requests} requests, {max_tokens[0]}..{max_tokens[1]} tokens (s)",
     "{seconds}", "{hf_seconds} (HF static)", "{ratio_vs_hf}x"),
    ("served", "b') the same over HTTP: {clients} streaming clients to gen serve (s)",
     "{seconds}", "{in_process_seconds} (in process)", "{overhead_ratio}x"),
    ("continuation", "c) {prompt_tokens}-token prompt, 1+{continuation_rounds} rounds "
     "x {round_tokens} (s)", "{seconds} (kv)", "{reprefill_seconds} (re-prefill)",
     "{ratio_vs_reprefill}x"),
    ("constraint", "f) a JSON-schema row beside a free row, {new_tokens} tokens (tok/s)",
     "{constrained_tokens_per_second}", "{free_pair_tokens_per_second} (2 free rows)",
     "{time_ratio_vs_free}x the time"),
)  # fmt: skip

OUTLINE_CHECKS = (
    ("count", "{n} items"), ("distinct", "distinct"), ("single_line", "one-line titles"),
    ("no_generic", "no generic"), ("only_list", "only the list"), ("ok", "all"),
)  # fmt: skip


def table(rows: Sequence[Row], strip: bool = True) -> list[str]:
    """The rows as lines of left-aligned columns two spaces apart; `strip=False` keeps the
    padding of the last column (the engine's table has always printed it)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return [line.rstrip() for line in lines] if strip else lines


def engine_rows(r: dict[str, Any]) -> list[Row]:
    """The engine's table: its head, then a row for each part measured."""
    rows = [ENGINE_HEAD]
    for key, *cells in ENGINE_ROWS:
        if key in r:
            figures = {"runs": 1} | r[key]  # a single stream without "runs" ran once
            rows.append(tuple(cell.format_map(figures) for cell in cells))
    return rows


def engine_lines(r: dict[str, Any]) -> list[str]:
    """`gen bench`'s text: the machine, the table, then a line for each figure beside it."""
    s, m, c = r["single_stream"], r["mixed_batch"], r["continuation"]
    kernels = "PyTorch's kernels (gen's not built)"
    if r["kernels"]:
        kernels = f"gen's kernels ({r['isa']})"
    lines = [f"# {r['model']}, dtype {r['dtype']}, {r['threads']} threads, {kernels}; "
             "HF in float32"]  # fmt: skip
    lines += table(engine_rows(r), strip=False)
    bi = r["batch_invariance"]
    lines.append(
        f"greedy tokens identical to HF: {s['identical_tokens']} "
        f"(first {s['agreeing_prefix']} agree); kv = re-prefill tokens: {c['same_tokens']}; "
        f"batched = alone: {bi['identical']} of {bi['requests']} requests"
    )
    lines.append(
        f"b) prompt tokens {m['prompt_tokens']}, of which copied from a shared prefix "
        f"(the chat template's system prompt): {m['prefix_reused_tokens']}"
    )
    if "served" in r:
        h = r["served"]
        lines.append(
            f"b') over HTTP: {h['tokens']} tokens streamed; text equal to in-process for "
            f"{h['identical']} of {h['requests']} requests"
        )
        if "round_seconds" in h:  # (a result from before the rounds has one of each)
            turns = ", ".join(f"{a} / {b}" for a, b in h["round_seconds"])
            lines.append(f"b') served / in process, taken in turns (s): {turns}")
        if "single" in h:
            g = h["single"]
            means = (  # (a result from before the medians has means only)
                f"; means {g['mean_first_token_ratio']}x and {g['mean_decode_ratio']}x"
                if "mean_decode_ratio" in g
                else ""
            )
            lines.append(
                f"b') one stream alone over HTTP ({'median' if means else 'mean'} of "
                f"{g['runs']}): first token {g['first_token_seconds']} s (in process "
                f"{g['in_process_first_token_seconds']} s, {g['first_token_ratio']}x), "
                f"decoding {g['decode_tokens_per_second']} tok/s (in process "
                f"{g['in_process_decode_tokens_per_second']}, {g['decode_ratio']}x){means}"
            )
    f = r["prefill"]
    lines.append(
        f"d) a {f['prompt_tokens']}-token prompt: {f['tokens_per_second']} tok/s; time to "
        f"first token: {r['ttft_seconds']} s; peak RSS: {r['peak_rss_mb']} MB"
    )
    if "load" in r:
        lines.append(load_line(r["load"], r.get("peers", {}).get("load")))
    if "constraint" in r:
        k = r["constraint"]
        lines.append(
            f"f) the schema costs {k['overhead_ms_per_token']} ms a token (its mask alone "
            f"{k['mask_ms_per_token']} ms; compiling it {k['schema_setup_ms']} ms a request, "
            f"reading the tokenizer {k['tokenizer_setup_seconds']} s once); a free row "
            f"alone {k['alone_tokens_per_second']} tok/s, beside the held row "
            f"{k['beside_constrained_tokens_per_second']}"
        )
    if "peers" in r:
        lines.append(peers_line(r["peers"], s))
    if "quality" in r:
        lines += dtype_lines(r["quality"], r["dtype"])
    return lines


def load_line(ours: dict[str, Any], llama: dict[str, Any] | None) -> str:
    """The load, warm, each in a process of its own: gen's, and llama-server's where run."""
    line = (
        f"l) load (warm, own process): {ours['load_seconds']} s, resident {ours['rss_mb']} MB "
        f"of which the model {ours['model_rss_mb']} MB, peak {ours['peak_rss_mb']} MB"
    )
    if "file_mb" in ours:
        line += f"; the file {ours['file_mb']} MB"
    if llama:
        line += (
            f"; llama-server (one slot of 1024): {llama['load_seconds']} s, resident "
            f"{llama.get('rss_mb')} MB, peak {llama.get('peak_rss_mb')} MB"
        )
    return line


def peers_line(p: dict[str, Any], s: dict[str, Any]) -> str:
    """llama.cpp's figures and ours against them (`s`: our single stream)."""
    if not p["available"]:
        return f"p) llama.cpp: not measured ({p['why']})"
    tg = f"tg{s['new_tokens']}"
    if "server_error" in p:
        server, mixed = f"failed ({p['server_error']})", ""
    else:
        server, mixed = f"{p['server_mixed_seconds']} s", f"mixed batch {p['mixed_ratio']}x, "
    line = (
        f"p) llama.cpp on the same GGUF: {tg} {p.get(tg)} tok/s, pp512 "
        f"{p.get('pp512')} tok/s (llama-bench); the mixed batch on llama-server "
        f"{server}. Ours against it: single stream "
        f"{p['single_ratio']}x (decoding: {s['decode_tokens_per_second']} tok/s after "
        f"the first token), {mixed}prompt {p.get('prefill_ratio')}x"
    )
    if "texts" in p:
        t = p["texts"]
        line += (
            f"\n   the mixed batch's greedy texts, llama-server's beside ours: equal for "
            f"{t['identical']} of {t['requests']}; on average {t['agreeing_share']:.0%} of a "
            "text before they part"
        )
    return line


def dtype_lines(q: dict[str, Any], dtype: str) -> list[str]:
    """A dtype's greedy tokens and perplexities against float32's, with every flip."""
    lines = [
        f"e) {dtype} against float32: greedy identical for {q['greedy_identical']} "
        f"of {q['prompts']} prompts ({q['tokens']} tokens; mean agreeing prefix "
        f"{q['mean_agreeing_prefix']})"
    ]
    for f in q["flips"]:
        lines.append(
            f"   flip: prompt {f['prompt']}, token {f['position']}: {f['ours']!r} against "
            f"float32's {f['float32']!r}, which float32 put {f['float32_logit_gap']} "
            "logits ahead"
        )
    for name, ppl in q["perplexity"].items():
        step = q["perplexity_decoding"][name]
        lines.append(
            f"   perplexity, {name} text: {ppl[dtype]} ({dtype}) against "
            f"{ppl['float32']} (float32) as a prompt; {step[dtype]} against "
            f"{step['float32']} token by token"
        )
    return lines


QUALITY_READER_HEAD: Row = (
    "junk", "language", "chatter", "relevance", "failed", "truncated", "cuts", "yields",
)  # fmt: skip
ABSENT = "—"  # a figure the manifest does not record


def quality_row(x: dict[str, Any], seeds: int) -> Row:
    """One document's cells; over seeds, words as "512 (488–530, spread 8%)" (the mean, the
    min–max, (max-min)/mean) and a cv cell beside it."""
    words = [str(x["words"])]
    if seeds > 1:
        words = [
            f"{x['words']} ({x['words_min']}–{x['words_max']}, spread {x['words_spread']:.0%})",
            f"{x['words_cv']:.0%}",
        ]
    return (x["name"], str(x["target_words"]), *words, str(x["length_score"]),
            _off_target_cell(x), str(x["distinct_4"]), f"{x['repeated_sentences']:.0%}",
            *reader_cells(x), str(x["seconds"]))  # fmt: skip


def reader_cells(x: dict[str, Any]) -> Row:
    """The reader's cells of a row: junk lines, the share in the wanted script, chatter cut
    (and its share), relevance, sections failed (and why), truncated; "—" for a figure the
    manifest does not record."""
    share, chatter, relevance = x["language_share"], x["chatter"], x["relevance"]
    chatter_cell = ABSENT if chatter is None else str(chatter)
    if chatter is not None and x["chatter_share"] is not None:
        chatter_cell += f" ({x['chatter_share']:.0%})"
    failed = str(x["sections_failed"])
    if x["failed_reasons"]:
        failed += f" ({', '.join(x['failed_reasons'])})"
    return (str(x["junk"]), ABSENT if share is None else f"{share:.0%}", chatter_cell,
            ABSENT if relevance is None else f"{relevance:.2f}", failed,
            str(x["truncated"]), _kinds_cell(x.get("cuts")),
            _kinds_cell(x.get("yields")))  # fmt: skip


def _kinds_cell(counts: dict[str, int] | None) -> str:
    """ "refrain 2, chatter 1", "0", or "—" where the figures predate it."""
    if counts is None:
        return ABSENT
    return ", ".join(f"{kind} {n}" for kind, n in counts.items()) or "0"


def _off_target_cell(x: dict[str, Any]) -> str:
    """Sections under S_l 80, and how many of them say no reason."""
    unexplained = x["off_target_unexplained"]
    return f"{x['off_target']}" + (f" ({unexplained} unexplained)" if unexplained else "")


def quality_lines(r: dict[str, Any]) -> list[str]:
    """`gen bench --quality`'s text: a row a document, the extremes, then every section off
    its target with the reason its manifest gives."""
    n = r["seeds"]
    words = ("words",) if n == 1 else (f"words ({n} seeds)", "cv")
    head = ("document", "target", *words, "S_l", "<80", "distinct-4", "repeated",
            *QUALITY_READER_HEAD, "seconds")  # fmt: skip
    lines = table([head] + [quality_row(x, n) for x in r["rows"]])
    lines.append(f"average S_l {r['length_score_avg']}, lowest distinct-4 {r['distinct_4_min']}, "
                 f"most repeated sentences {r['repeated_sentences_max']:.0%}")  # fmt: skip
    if n > 1:
        lines.append(f"over {n} seeds: S_l, distinct-4, repeated and seconds are means, <80 "
                     "and junk to truncated the worst seed's; widest "
                     f"spread {r['words_spread_max']:.0%}, "
                     f"largest cv {r['words_cv_max']:.0%}")  # fmt: skip
    for x in r["rows"]:
        if x.get("reading"):
            lines.append(f"a reader sees in {x['name']}: {x['reading']}")
    if not r["misses"]:
        lines.append("<80: no section ended under S_l 80 of its target")
    for m in r["misses"]:
        lines.append(f"<80: {m['name']}, seed {m['seed']}, section {m['section']}: "
                     f"{m['words']} of {m['target_words']} words, S_l {m['length_score']}: "
                     f"{m['why'] or 'the manifest gives no reason'}")  # fmt: skip
    return lines


def outline_rows(r: dict[str, Any]) -> list[Row]:
    """A row a mode: how many of its outlines pass each check."""
    head = ("outline", *(label.format(n=r["n_parts"]) for _, label in OUTLINE_CHECKS))
    return [head] + [
        (mode, *(f"{s[key]}/{s['outlines']}" for key, _ in OUTLINE_CHECKS))
        for mode, s in r["summary"].items()
    ]


def outline_lines(r: dict[str, Any]) -> list[str]:
    """`gen bench --outlines`' text: the table, and a note when nothing held the list."""
    lines = table(outline_rows(r))
    if not r["held_by_grammar"]:
        lines.append("this backend cannot hold a list to a grammar: held ran free as well")
    return lines
