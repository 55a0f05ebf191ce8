"""The benches' results as text, from fixed result dicts: every row, every table line (the
engine's padding included) and every line below them, to the byte; and `gen bench` printing
them, or refusing a --pipelines folder without the bench's pipeline."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from gen.bench import engine, outlines, quality, report
from gen.cli import main

SINGLE = {"new_tokens": 256, "runs": 3, "tokens_per_second": 61.23,
          "decode_tokens_per_second": 63.5, "hf_tokens_per_second": 20.1, "ratio_vs_hf": 3.05,
          "identical_tokens": True, "agreeing_prefix": 256}  # fmt: skip
MIXED = {"requests": 32, "max_tokens": [64, 256], "tokens": 5000, "seconds": 12.34,
         "hf_seconds": 50.0, "ratio_vs_hf": 4.05, "tokens_per_second": 400.1,
         "prompt_tokens": 1200, "prefix_reused_tokens": 900}  # fmt: skip
CONTINUATION = {"prompt_tokens": 1024, "rounds": 5, "continuation_rounds": 4, "round_tokens": 64,
                "seconds": 3.2, "reprefill_seconds": 9.9, "ratio_vs_reprefill": 3.09, "runs": 2,
                "same_tokens": True}  # fmt: skip
BENCH: dict[str, Any] = {
    "model": "smollm2-135m", "dtype": "float32", "threads": 2, "kernels": True, "isa": "avx2",
    "single_stream": SINGLE, "mixed_batch": MIXED, "continuation": CONTINUATION,
    "batch_invariance": {"requests": 8, "identical": 8},
    "prefill": {"prompt_tokens": 512, "tokens_per_second": 800.5},
    "ttft_seconds": 0.12, "peak_rss_mb": 900.0,
    "load": {"load_seconds": 1.5, "rss_mb": 400.0, "peak_rss_mb": 480.5, "model_rss_mb": 150.0,
             "dtype": "gguf", "file_mb": 93.8},
}  # fmt: skip
SERVED = {"requests": 32, "clients": 32, "rounds": 2, "seconds": 13.0,
          "in_process_seconds": 12.34, "round_seconds": [[12.5, 12.0], [13.5, 12.68]],
          "overhead_ratio": 1.054, "tokens": 5000, "identical": 32,
          "single": {"runs": 3, "first_token_seconds": 0.052,
                     "in_process_first_token_seconds": 0.05, "first_token_ratio": 1.04,
                     "decode_tokens_per_second": 101.5,
                     "in_process_decode_tokens_per_second": 104.0,
                     "decode_ratio": 1.025, "mean_first_token_ratio": 1.06,
                     "mean_decode_ratio": 1.03}}  # fmt: skip
CONSTRAINT = {"new_tokens": 64, "runs": 2, "alone_tokens_per_second": 50.0,
              "free_pair_tokens_per_second": 90.5, "constrained_tokens_per_second": 40.25,
              "beside_constrained_tokens_per_second": 44.0, "overhead_ms_per_token": -0.5,
              "time_ratio_vs_free": 1.12, "mask_ms_per_token": 0.3, "schema_setup_ms": 12.0,
              "tokenizer_setup_seconds": 1.5}  # fmt: skip
PEERS = {"available": True, "folder": "/x", "tg256": 70.1, "pp512": 300.0,
         "server_mixed_seconds": 20.0, "single_ratio": 0.87, "mixed_ratio": 1.6,
         "prefill_ratio": 2.67,
         "load": {"load_seconds": 0.4, "rss_mb": 180.2, "peak_rss_mb": 181.0}}  # fmt: skip
DTYPE = {"prompts": 8, "tokens": 64, "greedy_identical": 7, "mean_agreeing_prefix": 60.6,
         "flips": [{"prompt": 3, "position": 41, "ours": " 茶", "float32": " tea 🍵",
                    "float32_logit_gap": 0.0123}],
         "perplexity": {"english": {"gguf": 48.3, "float32": 48.1},
                        "chinese": {"gguf": 9.1, "float32": 9.0}},
         "perplexity_decoding": {"english": {"gguf": 50.3, "float32": 50.1},
                                 "chinese": {"gguf": 9.5, "float32": 9.4}}}  # fmt: skip
EVERYTHING = BENCH | {"dtype": "gguf", "served": SERVED, "constraint": CONSTRAINT,
                      "peers": PEERS, "quality": DTYPE}  # fmt: skip

EVERYTHING_LINES = [
    "# smollm2-135m, dtype gguf, 2 threads, gen's kernels (avx2); HF in float32",
    # the table keeps the last column's padding
    "what                                                           gen       baseline            "
    "ratio         ",
    "a) 1 sequence, 256 tokens (tok/s, mean of 3)                   61.23     20.1 (HF)           "
    "3.05x         ",
    "b) 32 requests, 64..256 tokens (s)                             12.34     50.0 (HF static)    "
    "4.05x         ",
    "b') the same over HTTP: 32 streaming clients to gen serve (s)  13.0      12.34 (in process)  "
    "1.054x        ",
    "c) 1024-token prompt, 1+4 rounds x 64 (s)                      3.2 (kv)  9.9 (re-prefill)    "
    "3.09x         ",
    "f) a JSON-schema row beside a free row, 64 tokens (tok/s)      40.25     90.5 (2 free rows)  "
    "1.12x the time",
    "greedy tokens identical to HF: True (first 256 agree); kv = re-prefill tokens: True; "
    "batched = alone: 8 of 8 requests",
    "b) prompt tokens 1200, of which copied from a shared prefix (the chat template's system "
    "prompt): 900",
    "b') over HTTP: 5000 tokens streamed; text equal to in-process for 32 of 32 requests",
    "b') served / in process, taken in turns (s): 12.5 / 12.0, 13.5 / 12.68",
    "b') one stream alone over HTTP (median of 3): first token 0.052 s (in process 0.05 s, "
    "1.04x), decoding 101.5 tok/s (in process 104.0, 1.025x); means 1.06x and 1.03x",
    "d) a 512-token prompt: 800.5 tok/s; time to first token: 0.12 s; peak RSS: 900.0 MB",
    "l) load (warm, own process): 1.5 s, resident 400.0 MB of which the model 150.0 MB, peak "
    "480.5 MB; the file 93.8 MB; llama-server (one slot of 1024): 0.4 s, resident 180.2 MB, "
    "peak 181.0 MB",
    "f) the schema costs -0.5 ms a token (its mask alone 0.3 ms; compiling it 12.0 ms a request, "
    "reading the tokenizer 1.5 s once); a free row alone 50.0 tok/s, beside the held row 44.0",
    "p) llama.cpp on the same GGUF: tg256 70.1 tok/s, pp512 300.0 tok/s (llama-bench); the mixed "
    "batch on llama-server 20.0 s. Ours against it: single stream 0.87x (decoding: 63.5 tok/s "
    "after the first token), mixed batch 1.6x, prompt 2.67x",
    "e) gguf against float32: greedy identical for 7 of 8 prompts (64 tokens; mean agreeing "
    "prefix 60.6)",
    "   flip: prompt 3, token 41: ' 茶' against float32's ' tea 🍵', which float32 put 0.0123 "
    "logits ahead",
    "   perplexity, english text: 48.3 (gguf) against 48.1 (float32) as a prompt; 50.3 against "
    "50.1 token by token",
    "   perplexity, chinese text: 9.1 (gguf) against 9.0 (float32) as a prompt; 9.5 against 9.4 "
    "token by token",
]


def test_the_engine_table_has_a_row_for_each_part_measured_in_order() -> None:
    assert report.engine_rows(BENCH) == [
        ("what", "gen", "baseline", "ratio"),
        ("a) 1 sequence, 256 tokens (tok/s, mean of 3)", "61.23", "20.1 (HF)", "3.05x"),
        ("b) 32 requests, 64..256 tokens (s)", "12.34", "50.0 (HF static)", "4.05x"),
        ("c) 1024-token prompt, 1+4 rounds x 64 (s)", "3.2 (kv)", "9.9 (re-prefill)", "3.09x"),
    ]
    rows = report.engine_rows(EVERYTHING)
    assert [row[0][:3] for row in rows] == ["wha", "a) ", "b) ", "b')", "c) ", "f) "]
    assert rows[3] == ("b') the same over HTTP: 32 streaming clients to gen serve (s)", "13.0",
                       "12.34 (in process)", "1.054x")  # fmt: skip
    assert rows[5][1:] == ("40.25", "90.5 (2 free rows)", "1.12x the time")
    # a single stream without "runs" (a result from before it had them) ran once
    once = BENCH | {"single_stream": {k: v for k, v in SINGLE.items() if k != "runs"}}
    assert report.engine_rows(once)[1][0] == "a) 1 sequence, 256 tokens (tok/s, mean of 1)"


def test_the_engine_text_to_the_byte() -> None:
    assert report.engine_lines(EVERYTHING) == EVERYTHING_LINES
    plain = report.engine_lines(BENCH | {"kernels": False, "isa": None})
    assert plain[0] == (
        "# smollm2-135m, dtype float32, 2 threads, PyTorch's kernels (gen's not built); "
        "HF in float32"
    )
    assert len(plain) == 1 + 4 + 4  # no b'), f), p) or e) lines for parts not measured
    assert plain[-2].startswith("d) a 512-token prompt")
    assert plain[-1].endswith("peak 480.5 MB; the file 93.8 MB")  # no llama-server's load
    assert plain[2].endswith("3.05x")  # as wide as "ratio": no padding
    missing = {"available": False, "why": "not built: run `make bench-peers` once"}
    assert report.engine_lines(BENCH | {"peers": missing})[-1] == (
        "p) llama.cpp: not measured (not built: run `make bench-peers` once)"
    )


READER: dict[str, Any] = {"junk": 0, "language_share": 1.0, "chatter": None, "chatter_share": None,
          "relevance": None, "sections_failed": 0, "failed_reasons": {}, "truncated": 0,
          "off_target": 0, "off_target_unexplained": 0, "cuts": {}, "yields": {}}  # fmt: skip
QUALITY_ROW = READER | {"name": "en-150", "target_words": 150, "words": 157, "words_min": 140,
                       "words_max": 166, "words_spread": 0.166, "words_cv": 0.068,
                       "length_score": 97.6, "distinct_4": 0.912, "repeated_sentences": 0.0,
                       "seconds": 4.8}  # fmt: skip
QUALITY_ROW_ZH = QUALITY_ROW | {"name": "zh-2000", "target_words": 2000, "words": 1234,
                                "words_min": 1000, "words_max": 1300, "words_spread": 0.243,
                                "words_cv": 0.101, "length_score": 58.0, "distinct_4": 0.7,
                                "repeated_sentences": 0.125, "seconds": 102.5, "junk": 3,
                                "language_share": 0.982, "chatter": 2, "chatter_share": 0.031,
                                "relevance": 0.4567, "sections_failed": 1,
                                "failed_reasons": {"language": 2, "loops": 1}, "truncated": 1,
                                "off_target": 1, "off_target_unexplained": 1,
                                "cuts": {"language": 2, "refrain": 1},
                                "yields": {"collapse": 1}}  # fmt: skip
MISSES = [{"name": "zh-2000", "seed": 24, "section": "body", "words": 1000,
           "target_words": 2000, "length_score": 50.0, "why": "loops; truncated"},
          {"name": "zh-2000", "seed": 25, "section": "body", "words": 1100,
           "target_words": 2000, "length_score": 59.1, "why": None}]  # fmt: skip
QUALITY = {"seeds": 5, "rows": [QUALITY_ROW, QUALITY_ROW_ZH], "length_score_avg": 77.8,
           "distinct_4_min": 0.7, "repeated_sentences_max": 0.125, "words_spread_max": 0.243,
           "words_cv_max": 0.101, "misses": MISSES}  # fmt: skip


def test_the_quality_rows_and_text() -> None:
    assert report.quality_row(QUALITY_ROW, 5) == (
        "en-150", "150", "157 (140–166, spread 17%)", "7%", "97.6", "0", "0.912", "0%",
        "0", "100%", "—", "—", "0", "0", "0", "0", "4.8",
    )  # fmt: skip
    assert report.quality_row(QUALITY_ROW_ZH, 1) == (
        "zh-2000", "2000", "1234", "58.0", "1 (1 unexplained)", "0.7", "12%",
        "3", "98%", "2 (3%)", "0.46", "1 (language, loops)", "1", "language 2, refrain 1",
        "collapse 1", "102.5",
    )  # fmt: skip
    assert report.quality_lines(QUALITY) == [
        "document  target  words (5 seeds)               cv   S_l   <80                "
        "distinct-4  repeated  junk  language  chatter  relevance  failed               "
        "truncated  cuts                   yields      seconds",
        "en-150    150     157 (140–166, spread 17%)     7%   97.6  0                  "
        "0.912       0%        0     100%      —        —          0                    "
        "0          0                      0           4.8",
        "zh-2000   2000    1234 (1000–1300, spread 24%)  10%  58.0  1 (1 unexplained)  "
        "0.7         12%       3     98%       2 (3%)   0.46       1 (language, loops)  "
        "1          language 2, refrain 1  collapse 1  102.5",
        "average S_l 77.8, lowest distinct-4 0.7, most repeated sentences 12%",
        "over 5 seeds: S_l, distinct-4, repeated and seconds are means, <80 and junk to "
        "truncated the worst seed's; widest spread 24%, largest cv 10%",
        "<80: zh-2000, seed 24, section body: 1000 of 2000 words, S_l 50.0: loops; truncated",
        "<80: zh-2000, seed 25, section body: 1100 of 2000 words, S_l 59.1: the manifest "
        "gives no reason",
    ]
    assert report.quality_lines(QUALITY | {"seeds": 1, "rows": [QUALITY_ROW], "misses": []}) == [
        "document  target  words  S_l   <80  distinct-4  repeated  junk  language  chatter  "
        "relevance  failed  truncated  cuts  yields  seconds",
        "en-150    150     157    97.6  0    0.912       0%        0     100%      —        "
        "—          0       0          0     0       4.8",
        "average S_l 77.8, lowest distinct-4 0.7, most repeated sentences 12%",
        "<80: no section ended under S_l 80 of its target",
    ]


def test_what_a_reader_sees_is_printed_beside_the_figures() -> None:
    rows = [QUALITY_ROW | {"reading": "reads well; the tide tables are exact"}, QUALITY_ROW_ZH]
    lines = report.quality_lines(QUALITY | {"rows": rows})
    assert "a reader sees in en-150: reads well; the tide tables are exact" in lines
    assert not any(line.startswith("a reader sees in zh-2000") for line in lines)


def test_absent_reader_figures_print_as_a_dash() -> None:
    """A section held to no script, chatter counted without a share, zero relevance."""
    row = QUALITY_ROW | {"language_share": None, "chatter": 0, "relevance": 0.0}
    assert report.reader_cells(row) == ("0", "—", "0", "0.00", "0", "0", "0", "0")
    # figures from before cuts and yields were counted
    old = {k: v for k, v in row.items() if k not in ("cuts", "yields")}
    assert report.reader_cells(old)[-2:] == ("—", "—")
    assert report.reader_cells(QUALITY_ROW)[1:4] == ("100%", "—", "—")


PASSED = {"outlines": 10, "count": 10, "distinct": 9, "single_line": 10, "no_generic": 8,
          "only_list": 10, "ok": 7}  # fmt: skip
OUTLINES = {"n_parts": 5, "held_by_grammar": True,
            "summary": {"held": PASSED, "free": PASSED | {"count": 3, "ok": 1}}}  # fmt: skip


def test_the_outline_rows_and_text() -> None:
    assert report.outline_rows(OUTLINES) == [
        ("outline", "5 items", "distinct", "one-line titles", "no generic", "only the list", "all"),
        ("held", "10/10", "9/10", "10/10", "8/10", "10/10", "7/10"),
        ("free", "3/10", "9/10", "10/10", "8/10", "10/10", "1/10"),
    ]
    assert report.outline_lines(OUTLINES) == [
        "outline  5 items  distinct  one-line titles  no generic  only the list  all",
        "held     10/10    9/10      10/10            8/10        10/10          7/10",
        "free     3/10     9/10      10/10            8/10        10/10          1/10",
    ]
    free_only = OUTLINES | {"held_by_grammar": False, "summary": {"held": PASSED}}
    assert report.outline_lines(free_only)[-1] == (
        "this backend cannot hold a list to a grammar: held ran free as well"
    )


def test_a_table_pads_its_columns_and_strips_only_when_asked() -> None:
    rows = [("a", "bb"), ("ccc", "d")]
    assert report.table(rows) == ["a    bb", "ccc  d"]
    assert report.table(rows, strip=False) == ["a    bb", "ccc  d "]


def test_gen_bench_prints_the_reports_lines(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(engine, "run_bench", lambda *a, **k: copy.deepcopy(EVERYTHING))
    assert main(["bench"]) == 0
    assert capsys.readouterr().out == "\n".join(EVERYTHING_LINES) + "\n"

    given: dict[str, Any] = {}

    def run_quality(*args: Any, **kwargs: Any) -> dict[str, Any]:
        given.update(kwargs)
        return copy.deepcopy(QUALITY)

    monkeypatch.setattr(quality, "run_quality", run_quality)
    monkeypatch.setattr(outlines, "run_outlines", lambda *a, **k: copy.deepcopy(OUTLINES))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / quality.RECIPE).write_text("", encoding="utf-8")  # only looked for
    assert main(["bench", "--quality", "--pipelines", str(tmp_path / "mine")]) == 0
    assert capsys.readouterr().out.splitlines() == report.quality_lines(QUALITY)
    assert given["pipelines"] == tmp_path / "mine"
    notes = tmp_path / "reading.json"
    notes.write_text('{"zh-2000": "字字清楚，结尾重复"}', encoding="utf-8")
    argv = ["bench", "--quality", "--pipelines", str(tmp_path / "mine"), "--reading", str(notes)]
    assert main(argv) == 0
    assert "a reader sees in zh-2000: 字字清楚，结尾重复" in capsys.readouterr().out.splitlines()
    notes.write_text('["not", "an", "object"]', encoding="utf-8")
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert "--reading" in err and "must be a JSON object of strings" in err
    (tmp_path / "mine" / outlines.TECH_REPORT).write_text("", encoding="utf-8")
    assert main(["bench", "--outlines", "--pipelines", str(tmp_path / "mine")]) == 0
    assert capsys.readouterr().out.splitlines() == report.outline_lines(OUTLINES)


def test_a_missing_bundled_pipeline_is_named_with_the_option(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ran: list[str] = []
    monkeypatch.setattr(quality, "run_quality", lambda *a, **k: ran.append("quality") or QUALITY)
    monkeypatch.setattr(outlines, "run_outlines", lambda *a, **k: ran.append("outlines"))
    monkeypatch.chdir(tmp_path)  # the default, pipelines/, is looked for here: not there
    assert main(["bench", "--outlines"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: pipelines/tech-report.yaml: no such file; --pipelines names")
    assert "Traceback" not in err
    assert main(["bench", "--quality", "--pipelines", "elsewhere"]) == 2
    err = capsys.readouterr().err
    assert "elsewhere/long-article.yaml: no such file" in err and "--pipelines" in err
    assert ran == []  # refused before any model loads
    # documents written in code need no bundled pipeline
    assert main(["bench", "--quality", "--only", "en-150,zh-2000"]) == 0
    assert ran == ["quality"]
