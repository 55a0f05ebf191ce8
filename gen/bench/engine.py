"""`gen bench`: our engine beside a Hugging Face `generate()` baseline, same weights and
prompts, in one run. Returns figures; the CLI prints them."""

from __future__ import annotations

import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

import torch

from gen.bench.constraint import constraint_cost
from gen.bench.load import measure as measure_load
from gen.bench.served import Single
from gen.engine import Engine, SamplingParams
from gen.engine.chat import encode_chat
from gen.engine.config import EngineConfig
from gen.engine.kv_cache import KVCache, common_prefix
from gen.models import LoadedModel, load_model

TOPICS = [
    "the history of tea",
    "how bridges stay up",
    "the water cycle",
    "black holes",
    "the printing press",
    "volcanoes",
    "how vaccines work",
    "the Silk Road",
    "photosynthesis",
    "the invention of the telephone",
    "coral reefs",
    "solar power",
    "the Roman aqueducts",
    "how airplanes fly",
    "the human heart",
    "plate tectonics",
]


# fixed texts for the perplexity comparison (written for this benchmark)
PERPLEXITY_TEXTS = {
    "english": (
        "The lighthouse keeper climbed the spiral stairs every evening at dusk. He trimmed "
        "the wick, polished the great lens until it shone, and wrote the weather in a "
        "leather book: the direction of the wind, the height of the waves, the ships that "
        "passed. In winter the storms came from the north and the spray reached the "
        "gallery windows. In summer the sea lay flat and grey, and fishing boats drifted "
        "home in the long light. When the lamp was finally replaced by an automatic beam, "
        "the keeper moved to the village, but he still walked to the cliff each night to "
        "watch the light turn, counting the seconds between the flashes as he always had."
    ),
    "chinese": (
        "春天来了，山上的雪慢慢融化，小河里的水变得清澈。农民们开始在田里播种，孩子们在草地上"
        "放风筝。城市里的公园也热闹起来，老人们在树下下棋，年轻人沿着湖边跑步。到了晚上，街道"
        "两旁的灯一盏一盏亮起，小吃摊飘出饺子和烤红薯的香味。人们说，一年之计在于春，这个季节"
        "最适合制定新的计划，学习新的知识，也最适合和家人一起出去走走。"
    ),
}


def prompt_messages(n: int) -> list[list[dict[str, str]]]:
    out = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        style = ["an essay", "a story", "a lesson", "a report"][i // len(TOPICS) % 4]
        out.append([{"role": "user", "content": f"Write {style} about {topic}."}])
    return out


def prompts(loaded: LoadedModel, n: int) -> list[list[int]]:
    return [encode_chat(loaded.tokenizer, m) for m in prompt_messages(n)]


def long_prompt(loaded: LoadedModel, tokens: int = 600) -> list[int]:
    para = (
        "The printing press changed how knowledge moved through Europe. Before it, books "
        "were copied by hand, slowly and at great cost; after it, pamphlets, bibles and "
        "scientific papers spread in weeks. "
    )
    text = para
    while len(loaded.tokenizer.encode(text)) < tokens - 40:
        text += para
    msg = [{"role": "user", "content": text + "\nContinue this history in detail."}]
    return encode_chat(loaded.tokenizer, msg)


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


class HFBaseline:
    def __init__(self, loaded: LoadedModel, model: str) -> None:
        from transformers import AutoModelForCausalLM

        from gen.models.store import prepare, resolve

        # the float32 weights: in dtype gguf `loaded.path` holds the tokenizer only (the
        # first bench on a new machine converts the GGUF once, as a float32 load does)
        path = prepare(resolve(model))
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        self.pad = loaded.config.eos_token_ids[0] if loaded.config.eos_token_ids else 0

    @torch.inference_mode()
    def generate(self, batch: list[list[int]], new_tokens: int) -> list[list[int]]:
        """Greedy, left-padded static batch, every row runs to new_tokens (EOS masked)."""
        width = max(len(p) for p in batch)
        ids = torch.tensor([[self.pad] * (width - len(p)) + p for p in batch])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch])
        out = self.model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
            pad_token_id=self.pad,
        )
        return [row[width:].tolist() for row in out]


def run_bench(
    model: str = "smollm2-135m",
    single_tokens: int = 256,
    mixed_requests: int = 32,
    progress: Callable[[str], None] = lambda _: None,
    config: EngineConfig | None = None,
    continuation_prompt: int = 600,
    round_tokens: int = 64,
    mixed_max: int = 256,
    served: bool = True,
    served_single_runs: int = 8,
    constraint_tokens: int = 32,
    constraint_runs: int = 2,
    peers: bool = False,
    prefill_tokens: int = 512,
    single_runs: int = 5,
    quality_tokens: int = 256,
) -> dict[str, Any]:
    """Our engine (run as `config` says, in its dtype) against Hugging Face in float32, on
    the same weights; with `served`, the mixed batch again through a `gen serve` the bench
    starts. The sizes are the issue's; smaller ones are for the tests."""
    config = config or EngineConfig()
    # first, with nothing else in memory or running: the load, warm, in a process of its own
    progress("load: twice in a process of its own, the second counted (warm)")
    loading = measure_load(model, config.dtype)
    loaded = load_model(model, config)
    engine = Engine(loaded.model, loaded.tokenizer, config, max_slots=max(16, mixed_requests))
    hf = HFBaseline(loaded, model)
    results: dict[str, Any] = {
        "model": loaded.name,
        "dtype": loaded.dtype,
        "threads": torch.get_num_threads(),
        "kernels": loaded.model.kernels is not None,  # gen.engine.kernels compiled and in use
        # the instruction set the matrix products run on (avx2, avx512), where in use
        "isa": loaded.model.kernels.isa() if loaded.model.kernels is not None else None,
        "load": loading,
    }

    # warm both up (first calls allocate and pick kernels)
    p0 = prompts(loaded, 1)[0]
    engine.generate([p0], SamplingParams(max_tokens=8, temperature=0))
    hf.generate([p0], 8)

    # a) one sequence, greedy, single_tokens new tokens, single_runs times (llama-bench
    # reports the mean of 5; so do we), its prompt's KV never kept from the run before:
    # time to first token is a whole prefill
    progress(f"single stream: {single_tokens} tokens x {single_runs}, ours")
    params = SamplingParams(max_tokens=single_tokens, min_tokens=single_tokens, temperature=0)
    first_token: list[float] = []
    totals: list[float] = []
    ours_ids: list[int] = []
    for run in range(single_runs):
        engine.runner.prefixes.clear()
        ids: list[int] = []
        start = time.perf_counter()
        for out in engine.stream(p0, params):
            if len(first_token) == run:
                first_token.append(time.perf_counter() - start)
            ids += out.token_ids
        totals.append(time.perf_counter() - start)
        ours_ids = ours_ids or ids
    ours_s = sum(totals) / len(totals)
    decode = [(single_tokens - 1) / (t - f) for t, f in zip(totals, first_token, strict=True)]
    progress(f"single stream: {single_tokens} tokens, Hugging Face")
    hf_ids, hf_s = timed(lambda: hf.generate([p0], single_tokens)[0])
    results["single_stream"] = {
        "new_tokens": single_tokens,
        "runs": single_runs,
        "tokens_per_second": round(sum(single_tokens / t for t in totals) / len(totals), 2),
        # after the first token (the prompt's forward): decoding alone, as llama-bench's tgN
        "decode_tokens_per_second": round(sum(decode) / len(decode), 2),
        "hf_tokens_per_second": round(single_tokens / hf_s, 2),
        "ratio_vs_hf": round(hf_s / ours_s, 2),
        "identical_tokens": ours_ids == hf_ids,
        "agreeing_prefix": common_prefix(ours_ids, hf_ids),
    }

    # b) mixed lengths: continuous batching against HF's static batch
    batch = prompts(loaded, mixed_requests)
    lengths = [
        16 + round(i * (mixed_max - 16) / max(1, mixed_requests - 1)) for i in range(mixed_requests)
    ]
    progress(f"mixed batch: {mixed_requests} requests, max_tokens 16..{mixed_max}, ours")
    plist = [SamplingParams(max_tokens=n, temperature=0, ignore_eos=True) for n in lengths]
    engine.runner.prefixes.clear()
    done, ours_mixed = timed(lambda: engine.generate(batch, plist))
    progress(f"mixed batch: {mixed_requests} requests, Hugging Face static batch")
    _, hf_mixed = timed(lambda: hf.generate(batch, max(lengths)))
    results["mixed_batch"] = {
        "requests": mixed_requests,
        "max_tokens": [min(lengths), max(lengths)],
        "tokens": sum(c.completion_tokens for c in done),
        "seconds": round(ours_mixed, 2),
        "hf_seconds": round(hf_mixed, 2),
        "ratio_vs_hf": round(hf_mixed / ours_mixed, 2),
        "tokens_per_second": round(sum(lengths) / ours_mixed, 1),
        "prompt_tokens": sum(len(p) for p in batch),
        "prefix_reused_tokens": sum(c.cached_prompt_tokens for c in done),
    }

    if served:
        from gen.bench.served import run_served

        # the mixed batch over HTTP and again in process, in turns (the machine drifts by
        # as much as the overhead measured): both warm, their KV memory grown and their
        # prompts' prefixes kept by the run before (a fresh process's first batch also
        # pays the first touch of that memory: see docs/performance.md); then single
        # streams in turns, each on a prompt neither side saw (the chat template's system
        # prompt cached on both, as after a mixed batch)
        progress(f"mixed batch: {mixed_requests} streaming clients to gen serve, in turns")
        expected = [c.text.rstrip("\ufffd") for c in done]  # (a reply never ends in half a char)
        unseen = prompt_messages(mixed_requests + served_single_runs)[mixed_requests:]
        http = run_served(
            model,
            config.dtype,
            loaded.name,
            prompt_messages(mixed_requests),
            lengths,
            expected,
            lambda: timed(lambda: engine.generate(batch, plist))[1],
            unseen,
            single_tokens,
            lambda m: _single(engine, lambda: encode_chat(loaded.tokenizer, m), params),
        )
        served_s, here_s = sum(http.seconds), sum(http.in_process_seconds)
        results["served"] = {
            "requests": mixed_requests,
            "clients": mixed_requests,
            "rounds": len(http.seconds),
            "seconds": round(served_s / len(http.seconds), 2),
            "in_process_seconds": round(here_s / len(http.seconds), 2),
            "overhead_ratio": round(served_s / here_s, 3),
            "round_seconds": [
                [round(a, 2), round(b, 2)]
                for a, b in zip(http.seconds, http.in_process_seconds, strict=True)
            ],
            "tokens": http.tokens,
            "identical": http.identical,
            "single": _single_figures(http.single, http.single_here),
        }

    if peers:
        texts = [c.text for c in done]
        results["peers"] = peer_figures(loaded, model, results, lengths, texts, progress)

    # batch invariance: the shortest requests of the mixed batch again, each alone
    solo_n = min(8, mixed_requests)
    progress(f"batch invariance: {solo_n} requests of the mixed batch, each alone")
    alone = [engine.generate([batch[i]], plist[i])[0].token_ids for i in range(solo_n)]
    results["batch_invariance"] = {
        "requests": solo_n,
        "identical": sum(alone[i] == done[i].token_ids for i in range(solo_n)),
    }

    # f) a row held to a JSON schema beside a free row, against free rows
    progress(f"constraint: a JSON-schema row beside a free row, {constraint_tokens} tokens")
    results["constraint"] = constraint_cost(loaded, engine, constraint_tokens, constraint_runs)

    # c) continuation: a first round and 4 continuation rounds of 64 tokens on a
    # ~600-token prompt, kv against re-sending the prompt and the history each round
    progress("continuation: kv against re-sending prompt + history")
    lp = long_prompt(loaded, continuation_prompt)
    round_params = SamplingParams(max_tokens=round_tokens, temperature=0, ignore_eos=True)
    # one section alone: each side gets an engine with one fresh KV row. The baseline
    # re-sends everything and recomputes it (no prefix reuse). Two runs each, taken in
    # turn, the faster one counted: this part is long enough for the machine to drift.
    kv_runs: list[float] = []
    re_runs: list[float] = []
    for _ in range(2):
        section = Engine(loaded.model, loaded.tokenizer, config, max_slots=1)
        kv_text, seconds = timed(partial(_kv_rounds, section, lp, round_params, 5))
        kv_runs.append(seconds)
        plain = Engine(loaded.model, loaded.tokenizer, config, max_slots=1, prefix_cache_bytes=0)
        re_text, seconds = timed(partial(_reprefill_rounds, plain, lp, round_params, 5))
        re_runs.append(seconds)
    kv_s, re_s = min(kv_runs), min(re_runs)
    results["continuation"] = {
        "prompt_tokens": len(lp),
        "rounds": 5,
        "continuation_rounds": 4,
        "round_tokens": round_tokens,
        "seconds": round(kv_s, 2),
        "reprefill_seconds": round(re_s, 2),
        "ratio_vs_reprefill": round(re_s / kv_s, 2),
        "runs": 2,
        "same_tokens": kv_text == re_text,
    }

    # d) prompt speed: a prompt of prefill_tokens run whole (llama-bench's pp512), the
    # faster of two runs on a fresh row; then time to first token and peak memory
    pp = long_prompt(loaded, prefill_tokens)[:prefill_tokens]
    runs = []
    for _ in range(2):
        fresh = Engine(loaded.model, loaded.tokenizer, config, max_slots=1, prefix_cache_bytes=0)
        runs.append(timed(partial(fresh.generate, [pp], SamplingParams(max_tokens=1)))[1])
    results["prefill"] = {
        "prompt_tokens": len(pp),
        "tokens_per_second": round(len(pp) / min(runs), 1),
    }
    if "peers" in results and results["peers"].get("pp512") and len(pp) == 512:
        results["peers"]["prefill_ratio"] = round(
            results["prefill"]["tokens_per_second"] / results["peers"]["pp512"], 2
        )
    results["ttft_seconds"] = round(first_token[0], 4) if first_token else None
    results["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)

    # e) what the dtype does to the output, against float32 on the same weights
    if loaded.dtype != "float32":
        progress(f"quality: {loaded.dtype} against float32")
        del hf
        reference = load_model(model, replace(config, dtype="float32"))
        results["quality"] = quality(loaded, reference, tokens=quality_tokens)
    return results


def _single(engine: Engine, prompt: Callable[[], list[int]], params: SamplingParams) -> Single:
    """One stream alone in process, from its messages as a served one: seconds to its
    first text (the chat template and tokenizer included), tokens a second after."""
    start = time.perf_counter()
    times: list[float] = []
    tokens = 0
    for out in engine.stream(prompt(), params):
        if out.text:
            times.append(time.perf_counter())
        tokens += len(out.token_ids)
    return Single(times[0] - start, (tokens - 1) / (times[-1] - times[0]))


def _single_figures(served: list[Single], here: list[Single]) -> dict[str, Any]:
    """Single streams over HTTP against the same in process: medians, and their ratios
    (time to first token: served / in process; decoding: in process / served); the means
    beside them. Medians lead, as serving benchmarks report time to first token: one
    stall of a few ms (the machine's scheduler) moves a mean of eight ~25 ms first tokens
    by several percent."""
    first, first_here = [s.first_token for s in served], [s.first_token for s in here]
    decode = [s.decode_tokens_per_second for s in served]
    decode_here = [s.decode_tokens_per_second for s in here]
    mean, median = statistics.fmean, statistics.median
    return {
        "runs": len(here),
        "first_token_seconds": round(median(first), 4),
        "in_process_first_token_seconds": round(median(first_here), 4),
        "first_token_ratio": round(median(first) / median(first_here), 3),
        "decode_tokens_per_second": round(median(decode), 1),
        "in_process_decode_tokens_per_second": round(median(decode_here), 1),
        "decode_ratio": round(median(decode_here) / median(decode), 3),
        "mean_first_token_ratio": round(mean(first) / mean(first_here), 3),
        "mean_decode_ratio": round(mean(decode_here) / mean(decode), 3),
    }


def peer_figures(
    loaded: LoadedModel,
    model: str,
    results: dict[str, Any],
    lengths: list[int],
    texts: list[str],
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """llama.cpp on the same GGUF (gen.bench.peers), and our ratios against it: single
    stream (decoding, after the prompt's forward) against llama-bench's tg<N> (which runs
    no prompt), the mixed batch against llama-server's time; and llama-server's greedy
    texts of the mixed batch beside ours, `texts` (llama.cpp rounds the activations to 8
    bits for its quantised products, gen keeps them float32: the texts part where the two
    roundings pick different tokens)."""
    from gen.bench.peers import run_peers
    from gen.bench.served import mixed_bodies
    from gen.models.store import resolve

    spec = resolve(model)
    if spec.kind != "gguf" or spec.path is None:
        return {"available": False, "why": f"{model} is not a GGUF file"}
    n = len(lengths)
    bodies = mixed_bodies(loaded.name, prompt_messages(n), lengths)
    tokens = results["single_stream"]["new_tokens"]
    template = getattr(loaded.tokenizer, "chat_template", None)  # the prompts gen ran
    figures = run_peers(spec.path, torch.get_num_threads(), bodies, progress, tokens, template)
    if figures["available"]:
        single = results["single_stream"]
        tg = figures.get(f"tg{single['new_tokens']}")  # decoding only: no prompt
        figures["single_ratio"] = round(single["decode_tokens_per_second"] / tg, 2) if tg else None
        mixed = results["mixed_batch"]["seconds"]
        if "server_mixed_seconds" in figures:  # (else llama-server failed: server_error)
            figures["mixed_ratio"] = round(figures["server_mixed_seconds"] / mixed, 2)
            figures["texts"] = text_agreement(texts, figures.pop("server_texts"))
    return figures


def text_agreement(ours: list[str], theirs: list[str]) -> dict[str, Any]:
    """How far two engines' texts of the same greedy requests agree: how many are equal,
    and the share of each text (characters, ours as the measure) before they part."""
    ours = [t.rstrip("\ufffd") for t in ours]  # (a streamed reply never ends in half a char)
    pairs = list(zip(ours, theirs, strict=True))
    shares = [common_prefix(a, b) / len(a) if a else float(a == b) for a, b in pairs]
    return {
        "requests": len(ours),
        "identical": sum(a == b for a, b in pairs),
        "agreeing_share": round(sum(shares) / len(shares), 3) if shares else None,
    }


def quality(
    loaded: LoadedModel, reference: LoadedModel, n: int = 8, tokens: int = 64
) -> dict[str, Any]:
    """Greedy agreement with `reference` (float32) over n benchmark prompts, each alone,
    and the perplexity of both on the fixed texts below. The reference decodes the n
    prompts in one batch: in float32 that gives the same tokens as alone, bit for bit."""
    ps = prompts(loaded, n)
    params = SamplingParams(max_tokens=tokens, min_tokens=tokens, temperature=0)
    ours = Engine(loaded.model, loaded.tokenizer, max_slots=1)
    ref = Engine(reference.model, reference.tokenizer, max_slots=n)
    want = [c.token_ids for c in ref.generate(ps, params)]
    got = [ours.generate([p], params)[0].token_ids for p in ps]
    prefixes = [common_prefix(a, b) for a, b in zip(got, want, strict=True)]
    flips = [
        flip(reference, i, ps[i] + want[i][:j], got[i][j], want[i][j])
        for i, j in enumerate(prefixes)
        if j < tokens
    ]
    return {
        "prompts": n,
        "tokens": tokens,
        "greedy_identical": sum(k == tokens for k in prefixes),
        "mean_agreeing_prefix": round(sum(prefixes) / n, 1),
        "flips": flips,
        # over the text as a prompt (one forward) and token by token (as in decoding)
        "perplexity": perplexities(loaded, reference, stepwise=False),
        "perplexity_decoding": perplexities(loaded, reference, stepwise=True),
    }


@torch.inference_mode()
def flip(
    reference: LoadedModel, prompt: int, ids: list[int], ours: int, theirs: int
) -> dict[str, Any]:
    """Where our greedy tokens first leave float32's: the prompt's index, the position,
    both tokens, and float32's logit gap between its pick and ours there (a near-tie is a
    small gap; a wrong product would show a large one)."""
    logits = prompt_logits(reference, ids)[0, -1]
    return {
        "prompt": prompt,
        "position": len(ids),
        "ours": reference.tokenizer.decode([ours]),
        "float32": reference.tokenizer.decode([theirs]),
        "float32_logit_gap": round(float(logits[theirs] - logits[ours]), 4),
    }


def perplexities(
    loaded: LoadedModel, reference: LoadedModel, stepwise: bool
) -> dict[str, dict[str, float]]:
    """{text name: {dtype: perplexity, "float32": perplexity}} over PERPLEXITY_TEXTS."""
    return {
        name: {
            loaded.dtype: round(perplexity(loaded, text, stepwise), 3),
            "float32": round(perplexity(reference, text, stepwise), 3),
        }
        for name, text in PERPLEXITY_TEXTS.items()
    }


@torch.inference_mode()
def perplexity(loaded: LoadedModel, text: str, stepwise: bool = False) -> float:
    """exp of the mean next-token loss over `text` (no chat template), in one forward, or
    with stepwise one token at a time through the decoding path."""
    ids = loaded.tokenizer.encode(text)
    if stepwise:
        cache = fresh_cache(loaded, len(ids))
        steps = [
            loaded.model(torch.tensor([[t]]), torch.tensor([[i]]), torch.tensor([0]), cache)
            for i, t in enumerate(ids[:-1])
        ]
        loss = torch.nn.functional.cross_entropy(torch.cat(steps), torch.tensor(ids[1:]))
        return float(torch.exp(loss))
    logits = prompt_logits(loaded, ids)
    loss = torch.nn.functional.cross_entropy(logits[0, :-1], torch.tensor(ids[1:]))
    return float(torch.exp(loss))


def fresh_cache(loaded: LoadedModel, n: int) -> KVCache:
    """A one-row KV cache with room for n positions, reserved."""
    cache = KVCache(loaded.config, 1, n)
    cache.reserve(1, n)
    return cache


@torch.inference_mode()
def prompt_logits(loaded: LoadedModel, ids: list[int]) -> torch.Tensor:
    """ids as one prompt in a fresh cache, one forward: (1, len(ids), vocab) logits."""
    return loaded.model(
        torch.tensor([ids]),
        torch.arange(len(ids))[None, :],
        torch.tensor([0]),
        fresh_cache(loaded, len(ids)),
        all_logits=True,
    )


def _kv_rounds(engine: Engine, prompt: list[int], params: SamplingParams, rounds: int) -> list[int]:
    rid = engine.add_request(prompt, params, hold=True)
    ids: list[int] = []
    for r in range(rounds):
        if r:
            engine.resume(rid, params.max_tokens)
        while True:
            outs = [o for o in engine.step() if o.request_id == rid]
            for o in outs:
                ids += o.token_ids
            if any(o.finished for o in outs):
                break
    engine.release(rid)
    return ids


def _reprefill_rounds(
    engine: Engine, prompt: list[int], params: SamplingParams, rounds: int
) -> list[int]:
    ids: list[int] = []
    for _ in range(rounds):
        done = engine.generate([prompt + ids], params)[0]
        ids += done.token_ids
    return ids
