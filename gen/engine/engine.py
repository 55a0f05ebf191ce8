"""The decode engine: requests in, streamed Outputs out. `step()` is the glue: the
scheduler decides what runs, the model runner runs it, the sampler picks tokens.

It knows token ids and a tokenizer's decode(); prompts arrive already encoded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import torch

from gen.engine.config import EngineConfig
from gen.engine.detokenizer import Tokenizer
from gen.engine.grammar import GrammarError, Grammars
from gen.engine.model_runner import CausalLM, ModelRunner
from gen.engine.penalties import SequenceBreakers
from gen.engine.sampler import sample, token_logprobs
from gen.engine.scheduler import Scheduler
from gen.engine.sequence import Output, Sequence, Status
from gen.sampling import SamplingParams, TokenLogprob


@dataclass(frozen=True, slots=True)
class EngineStats:
    """What the engine holds at one moment (a server's /metrics)."""

    running: int = 0  # admitted: their prompts run or they decode
    waiting: int = 0  # queued for a slot or KV memory (a resumed round included)
    parked: int = 0  # between rounds, holding their KV rows
    kv_used_bytes: int = 0  # the positions live rows hold
    kv_allocated_bytes: int = 0  # the dense cache as allocated
    prefix_cache_bytes: int = 0  # finished prompts kept for reuse


class Engine:
    def __init__(
        self,
        model: CausalLM,
        tokenizer: Tokenizer,
        config: EngineConfig | None = None,
        **settings: Any,
    ) -> None:
        """config, with any of its fields given as `settings` in place of its own (see
        EngineConfig: rows, context length, prefill budgets, KV and prefix-cache memory;
        its dtype and kernels are the loader's)."""
        self.config = replace(config or EngineConfig(), **settings)
        cfg = model.cfg
        self.tokenizer = tokenizer
        self.eos_ids = cfg.eos_token_ids
        self.max_model_len = min(
            self.config.max_model_len or cfg.max_position_embeddings, cfg.max_position_embeddings
        )
        self.runner = ModelRunner(
            model,
            self.config.max_slots,
            self.max_model_len,
            kv_budget_bytes=self.config.kv_budget_bytes,
            prefix_cache_bytes=self.config.prefix_cache_bytes,
            chunk=max(self.config.max_prefill_tokens, self.config.prefill_chunk),
        )
        self.scheduler = Scheduler(
            self.runner, self.config.max_prefill_tokens, self.config.prefill_chunk
        )
        self.requests: dict[str, Sequence] = {}
        self.breakers = SequenceBreakers(tokenizer, cfg.vocab_size)  # DRY's, decoded lazily
        self.grammars = Grammars(tokenizer, cfg.vocab_size)  # constrained requests' matchers

    def add_request(
        self,
        prompt_ids: list[int],
        params: SamplingParams,
        request_id: str | None = None,
        hold: bool = False,
    ) -> str:
        """Queue a request. With hold=True a round that reaches max_tokens parks the request
        with its KV cache and text state, for `resume` (another round) or `release`."""
        if len(prompt_ids) >= self.max_model_len:
            raise ValueError(
                f"prompt has {len(prompt_ids)} tokens; the context window holds "
                f"{self.max_model_len} and needs room for at least one more"
            )
        if request_id is not None and request_id in self.requests:
            raise ValueError(f"request id {request_id!r} is already in use")
        seq = Sequence(prompt_ids, params, self.tokenizer, self.eos_ids, request_id, hold)
        if params.constraint is not None:
            seq.grammar = self.grammars.state(params.constraint)
        seq.reserved_tokens = self._reservation(seq.reserved_tokens, "request")
        self.requests[seq.request_id] = seq
        self.scheduler.add(seq)
        return seq.request_id

    def _reservation(self, tokens: int, what: str) -> int:
        """The KV positions `what` may need, capped at the context window; refused when even
        a cache holding nothing else could not keep them within the budget."""
        tokens = min(tokens, self.max_model_len)
        cache = self.runner.cache
        if not cache.fits(1, tokens):
            need = cache.bytes_for(cache.rounded(tokens))
            raise ValueError(
                f"{what} needs {need} bytes of KV memory ({tokens} tokens), "
                f"more than the whole budget of {cache.budget_bytes} bytes"
            )
        return tokens

    def abort(self, request_id: str) -> Output | None:
        """Cancel a request and free its KV memory at once."""
        seq = self._end(request_id)
        return None if seq is None else seq.abort()

    def resume(self, request_id: str, max_tokens: int) -> int:
        """Continue a parked request for up to max_tokens more; nothing is re-prefilled.
        Returns the tokens of context carried over in the cache. A round that would take
        the KV cache past its budget waits until running requests have freed enough."""
        seq = self.requests[request_id]
        need = self._reservation(
            seq.total_len + max_tokens, f"another round of {max_tokens} tokens"
        )
        carried = seq.resume(max_tokens)
        seq.reserved_tokens = need
        self.scheduler.resume(seq)
        return carried

    def release(self, request_id: str) -> Output | None:
        """Finish a parked request: free its KV memory and return its held-back text."""
        seq = self._end(request_id)
        if seq is None:
            return None
        return seq.release() if seq.status is Status.PARKED else seq.abort()

    def score(self, contexts: list[list[int]], ids: list[int]) -> list[list[float]]:
        """Per context, the log-probability of each of `ids` after the context and the ids
        before it: the model's own judgement of a text. Between steps, in rows of its own
        (the requests in flight keep their cache and their tokens); each context needs at
        least one id, and context + ids must fit the context window."""
        if not ids:
            return [[] for _ in contexts]
        for context in contexts:
            if not context or len(context) + len(ids) > self.max_model_len:
                raise ValueError(
                    f"a scored text needs a context of at least one token and both within "
                    f"the context window of {self.max_model_len}; got {len(context)} + "
                    f"{len(ids)}"
                )
        rows = [context + ids for context in contexts]
        found = self.runner.logprobs(rows, [len(c) for c in contexts])
        return [row.tolist() for row in found]

    def prompt_logprobs(self, ids: list[int], top: int) -> list[TokenLogprob]:
        """The log-probability of each of ids[1:] given the ids before it, with its `top`
        likeliest alternatives (the first id, given nothing, has none): a prompt scored as
        `echo` with logprobs reports it. Between steps, in a row of its own (as score)."""
        if len(ids) < 2:
            return []
        if len(ids) > self.max_model_len:
            raise ValueError(f"{len(ids)} ids are past the context window of {self.max_model_len}")
        (logits,) = self.runner.scored_logits([ids], [1])  # (len(ids) - 1, vocab)
        return token_logprobs(logits, ids[1:], [top] * (len(ids) - 1))

    def reset(self) -> None:
        """Drop every request and free all KV memory (after a failed step)."""
        for seq in list(self.requests.values()):
            self._drop(seq)

    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished()

    def stats(self) -> EngineStats:
        sched, cache = self.scheduler, self.runner.cache
        return EngineStats(
            running=len(sched.running),
            waiting=len(sched.waiting) + len(sched.resuming),
            parked=sum(s.status is Status.PARKED for s in self.requests.values()),
            kv_used_bytes=sum(
                cache.bytes_for(s.num_cached)
                for s in self.runner.slots.owners
                if isinstance(s, Sequence)
            ),
            kv_allocated_bytes=cache.nbytes(),
            prefix_cache_bytes=self.runner.prefixes.nbytes,
        )

    def step(self, scheduled: Callable[[], None] | None = None) -> list[Output]:
        """One step: the scheduler picks prompt pieces and decoding rows, they go through
        the model together, and each row whose prompt has run samples its next token.
        `scheduled` is called once they are picked, before the model runs (whether or not
        anything was picked)."""
        step = self.scheduler.schedule()
        if scheduled is not None:
            scheduled()
        if not step:
            return []
        logits = self.runner.run(step.prompts, step.decode)  # (prompts + decode, vocab)
        outputs: list[Output] = []
        for i, (seq, _) in enumerate(step.prompts):
            if seq.num_cached == len(seq.prompt_ids):
                outputs += self._sample([seq], logits[i : i + 1])
        if step.decode:
            outputs += self._sample(step.decode, logits[len(step.prompts) :])
        return outputs

    def _sample(self, seqs: list[Sequence], logits: torch.Tensor) -> list[Output]:
        """Each row's next token. A row whose grammar fails (too costly, nothing allowed)
        ends alone, with an Output carrying the error; the others go on."""
        width = logits.shape[-1]
        outputs: list[Output] = []
        masks: list[torch.Tensor | None] = []
        rows: list[int] = []
        for i, s in enumerate(seqs):
            try:
                masks.append(s.grammar.allowed(width) if s.grammar else None)
            except GrammarError as exc:
                outputs.append(self._fail(s, exc))
                continue
            rows.append(i)
        if len(rows) < len(seqs):
            seqs, logits = [seqs[i] for i in rows], logits[rows]
        if not seqs:
            return outputs
        tokens = sample(
            logits,
            [s.params for s in seqs],
            [s.generator for s in seqs],
            [s.seen_mask(width) for s in seqs],
            [s.banned_ids() for s in seqs],
            [s.penalty_state(width, self.breakers) for s in seqs],
            masks,
        )
        logprobs = self._logprobs(seqs, logits, tokens)
        for i, (seq, token) in enumerate(zip(seqs, tokens, strict=True)):
            try:
                out = seq.append(token, self.max_model_len)
            except GrammarError as exc:
                outputs.append(self._fail(seq, exc))
                continue
            if i in logprobs and token in out.token_ids:
                out.logprobs = [logprobs[i]]  # a token of the text (not a final EOS)
            if seq.status is Status.PARKED:
                self.scheduler.remove(seq)
            elif seq.finished:
                self._drop(seq)
            outputs.append(out)
        return outputs

    def _fail(self, seq: Sequence, error: Exception) -> Output:
        """End one request that cannot go on, freeing its memory; its Output says why."""
        out = seq.abort()
        out.error = error
        self._drop(seq)
        return out

    def _end(self, request_id: str) -> Sequence | None:
        """The request, dropped with its KV memory freed; None when it is unknown or had
        finished (and is forgotten)."""
        seq = self.requests.pop(request_id, None)
        if seq is None or seq.finished:
            return None
        self._drop(seq)
        return seq

    def _drop(self, seq: Sequence) -> None:
        """Forget a request: out of the scheduler's queues, its KV rows freed."""
        self.scheduler.remove(seq)
        self.runner.release_slot(seq)
        self.requests.pop(seq.request_id, None)

    def _logprobs(
        self, seqs: list[Sequence], logits: torch.Tensor, tokens: list[int]
    ) -> dict[int, TokenLogprob]:
        """Row -> its token's log probability, for the rows whose request asks for them."""
        asked = [i for i, s in enumerate(seqs) if s.params.logprobs is not None]
        if not asked:
            return {}
        top = [seqs[i].params.logprobs or 0 for i in asked]
        found = token_logprobs(logits[asked], [tokens[i] for i in asked], top)
        return dict(zip(asked, found, strict=True))

    def stream(self, prompt_ids: list[int], params: SamplingParams) -> Iterator[Output]:
        """Run one request to the end (others in the engine advance too), yielding its outputs."""
        rid = self.add_request(prompt_ids, params)
        try:
            while True:
                for out in self.step():
                    if out.request_id == rid:
                        if out.error is not None:
                            raise out.error
                        yield out
                        if out.finished:
                            return
        finally:
            self.abort(rid)

    def generate(
        self, prompts: list[list[int]], params: SamplingParams | list[SamplingParams]
    ) -> list[Completion]:
        """Run several requests together to the end; results in input order."""
        plist = params if isinstance(params, list) else [params] * len(prompts)
        ids = [self.add_request(p, sp) for p, sp in zip(prompts, plist, strict=True)]
        done: dict[str, Completion] = {rid: Completion() for rid in ids}
        try:
            while any(not c.finished for c in done.values()):
                for out in self.step():
                    if out.error is not None and out.request_id in done:
                        raise out.error
                    if out.request_id in done:
                        done[out.request_id].add(out)
        finally:
            for rid in ids:
                if not done[rid].finished:
                    self.abort(rid)
        return [done[rid] for rid in ids]


class Completion:
    """The outputs of one request, accumulated."""

    def __init__(self) -> None:
        self.text = ""
        self.token_ids: list[int] = []
        self.deltas: list[str] = []
        self.finished = False
        self.finish_reason: str | None = None
        self.stop_reason: int | str | None = None
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cached_prompt_tokens = 0
        self.logprobs: list[TokenLogprob] = []

    def add(self, out: Output) -> None:
        self.deltas.append(out.text)
        self.text += out.text
        self.token_ids += out.token_ids
        self.logprobs += out.logprobs
        if out.finished:
            self.finished = True
            self.finish_reason = out.finish_reason
            self.stop_reason = out.stop_reason
            self.prompt_tokens = out.prompt_tokens
            self.completion_tokens = out.completion_tokens
            self.cached_prompt_tokens = out.cached_prompt_tokens
