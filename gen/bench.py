"""`gen bench`: our engine beside a Hugging Face `generate()` baseline, same weights and
prompts, in one run. Returns figures; the CLI prints them."""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from typing import Any

import torch

from gen.engine import Engine, SamplingParams
from gen.engine.chat import encode_chat
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


def prompts(loaded: LoadedModel, n: int) -> list[list[int]]:
    out = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        style = ["an essay", "a story", "a lesson", "a report"][i // len(TOPICS) % 4]
        msg = [{"role": "user", "content": f"Write {style} about {topic}."}]
        out.append(encode_chat(loaded.tokenizer, msg))
    return out


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
    def __init__(self, loaded: LoadedModel) -> None:
        from transformers import AutoModelForCausalLM

        self.model = AutoModelForCausalLM.from_pretrained(loaded.path, dtype=torch.float32).eval()
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
) -> dict[str, Any]:
    loaded = load_model(model)
    engine = Engine(loaded.model, loaded.tokenizer, max_slots=max(16, mixed_requests))
    hf = HFBaseline(loaded)
    results: dict[str, Any] = {"model": loaded.name, "threads": torch.get_num_threads()}

    # warm both up (first calls allocate and pick kernels)
    p0 = prompts(loaded, 1)[0]
    engine.generate([p0], SamplingParams(max_tokens=8, temperature=0))
    hf.generate([p0], 8)

    # a) one sequence, greedy, single_tokens new tokens
    progress(f"single stream: {single_tokens} tokens, ours")
    params = SamplingParams(max_tokens=single_tokens, min_tokens=single_tokens, temperature=0)
    first_token: list[float] = []
    start = time.perf_counter()
    ours_ids: list[int] = []
    for out in engine.stream(p0, params):
        if not first_token:
            first_token.append(time.perf_counter() - start)
        ours_ids += out.token_ids
    ours_s = time.perf_counter() - start
    progress(f"single stream: {single_tokens} tokens, Hugging Face")
    hf_ids, hf_s = timed(lambda: hf.generate([p0], single_tokens)[0])
    results["single_stream"] = {
        "new_tokens": single_tokens,
        "tokens_per_second": round(single_tokens / ours_s, 2),
        "hf_tokens_per_second": round(single_tokens / hf_s, 2),
        "ratio_vs_hf": round(hf_s / ours_s, 2),
        "identical_tokens": ours_ids == hf_ids,
        "agreeing_prefix": _agree(ours_ids, hf_ids),
    }

    # b) mixed lengths: continuous batching against HF's static batch
    batch = prompts(loaded, mixed_requests)
    lengths = [
        16 + round(i * (256 - 16) / max(1, mixed_requests - 1)) for i in range(mixed_requests)
    ]
    progress(f"mixed batch: {mixed_requests} requests, max_tokens 16..256, ours")
    plist = [SamplingParams(max_tokens=n, temperature=0, ignore_eos=True) for n in lengths]
    done, ours_mixed = timed(lambda: engine.generate(batch, plist))
    progress(f"mixed batch: {mixed_requests} requests, Hugging Face static batch")
    _, hf_mixed = timed(lambda: hf.generate(batch, max(lengths)))
    results["mixed_batch"] = {
        "requests": mixed_requests,
        "tokens": sum(c.completion_tokens for c in done),
        "seconds": round(ours_mixed, 2),
        "hf_seconds": round(hf_mixed, 2),
        "ratio_vs_hf": round(hf_mixed / ours_mixed, 2),
        "tokens_per_second": round(sum(lengths) / ours_mixed, 1),
    }

    # c) continuation: 4 rounds of 64 on a ~600-token prompt, kv against re-prefill
    progress("continuation: kv against re-sending prompt + history")
    lp = long_prompt(loaded)
    round_params = SamplingParams(max_tokens=64, temperature=0, ignore_eos=True)
    kv_text, kv_s = timed(lambda: _kv_rounds(engine, lp, round_params, 4))
    re_text, re_s = timed(lambda: _reprefill_rounds(engine, lp, round_params, 4))
    results["continuation"] = {
        "prompt_tokens": len(lp),
        "rounds": 4,
        "round_tokens": 64,
        "seconds": round(kv_s, 2),
        "reprefill_seconds": round(re_s, 2),
        "ratio_vs_reprefill": round(re_s / kv_s, 2),
        "same_tokens": kv_text == re_text,
    }

    # d) time to first token (prefill of the single-stream prompt) and peak memory
    results["ttft_seconds"] = round(first_token[0], 4) if first_token else None
    results["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return results


def _agree(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


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
