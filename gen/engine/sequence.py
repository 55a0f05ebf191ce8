"""One request's state: its ids, sampling settings, stop handling and streamed text."""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass, field, replace

import torch

from gen.engine.detokenizer import Detokenizer, Tokenizer
from gen.engine.grammar import GrammarState
from gen.engine.penalties import PenaltyState, SequenceBreakers
from gen.engine.stopping import StopStringMatcher
from gen.sampling import SamplingParams, TokenLogprob

_ids = itertools.count()


class Status(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    PARKED = "parked"  # a round ended at max_tokens; KV kept for a continuation round
    FINISHED = "finished"


@dataclass(slots=True)
class Output:
    """What one step produced for one request: newly visible text and token ids."""

    request_id: str
    text: str
    token_ids: list[int]
    finished: bool = False
    finish_reason: str | None = None  # "stop" | "length" | "abort"
    stop_reason: int | str | None = None  # None for EOS, the stop token id, or the stop string
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    parked: bool = False  # the round ended at max_tokens and the request can resume
    logprobs: list[TokenLogprob] = field(default_factory=list)  # of token_ids, if asked
    error: Exception | None = None  # the request failed alone (its grammar): finish "abort"


class Sequence:
    def __init__(
        self,
        prompt_ids: list[int],
        params: SamplingParams,
        tokenizer: Tokenizer,
        eos_ids: tuple[int, ...],
        request_id: str | None = None,
        hold: bool = False,
    ) -> None:
        if not prompt_ids:
            raise ValueError("prompt must hold at least one token")
        self.request_id = request_id or f"req-{next(_ids)}"
        self.prompt_ids = list(prompt_ids)
        self.params = params
        self.eos_ids = eos_ids
        self.hold = hold  # park instead of finishing when a round reaches max_tokens
        self.reserved_tokens = len(self.prompt_ids) + params.max_tokens  # KV rows it may need
        self.round_start = 0  # completion_tokens when the current round began
        self.output_ids: list[int] = []  # generated ids, without a final EOS / stop token
        self.completion_tokens = 0  # every sampled token, a final EOS / stop token included
        self.cached_prompt_tokens = 0
        self.status = Status.WAITING
        self.slot: int | None = None
        self.num_cached = 0  # leading ids whose keys and values are in the cache
        self.last_token: int | None = None
        self.finish_reason: str | None = None
        self.stop_reason: int | str | None = None
        self.generator: torch.Generator | None = None
        self._seen: torch.Tensor | None = None  # repetition penalty ids, made on first use
        self.penalties: PenaltyState | None = None  # generated ids indexed, made on first use
        self.grammar: GrammarState | None = None  # its constraint's matcher, if it has one
        if not params.greedy:
            self.generator = torch.Generator()
            if params.seed is None:
                self.generator.seed()
            else:
                self.generator.manual_seed(params.seed)
        self.detok = Detokenizer(tokenizer, self.prompt_ids, params.skip_special_tokens)
        self.matcher = StopStringMatcher(params.stop, params.include_stop_str_in_output)

    @property
    def total_len(self) -> int:
        """Tokens that occupy the cache once the last sampled token is fed back."""
        return len(self.prompt_ids) + self.completion_tokens

    @property
    def finished(self) -> bool:
        return self.status is Status.FINISHED

    @property
    def prefilled(self) -> bool:
        """Has the whole prompt been run (and a first token sampled)?"""
        return self.last_token is not None

    def pending_ids(self) -> list[int]:
        """Ids not yet run through the model (the prompt at first, then the last token)."""
        if self.last_token is None:
            return self.prompt_ids[self.num_cached :]
        return [self.last_token]

    def banned_ids(self) -> tuple[int, ...]:
        """Ids that may not be sampled yet: EOS and stop tokens before min_tokens."""
        if self.completion_tokens >= self.params.min_tokens:
            return ()
        return (*self.eos_ids, *self.params.stop_token_ids)

    def history(self) -> list[int]:
        return self.prompt_ids + self.output_ids

    def seen_mask(self, vocab: int) -> torch.Tensor | None:
        """The ids the repetition penalty applies to (prompt and output) as a (vocab,) mask,
        kept up to date token by token; None without a repetition penalty."""
        if self.params.repetition_penalty == 1.0:
            return None
        if self._seen is None:
            self._seen = torch.zeros(vocab, dtype=torch.bool)
            ids = [i for i in self.history() if 0 <= i < vocab]
            self._seen[ids] = True
        return self._seen

    def penalty_state(self, vocab: int, breakers: SequenceBreakers) -> PenaltyState | None:
        """The penalties over the generated ids (every round's; DRY's over the prompt too, or
        its last dry_prompt_tokens ids), kept up to date token by token; None when the
        params use none."""
        p = self.params
        if not p.has_penalties:
            return None
        if self.penalties is None:
            if p.dry_multiplier:
                ids, words = breakers.ids(p.dry_sequence_breakers), breakers.word_parts()
                self.penalties = PenaltyState(p, vocab, ids, words)
            else:
                self.penalties = PenaltyState(p, vocab)
            n = p.dry_prompt_tokens
            context = self.prompt_ids
            if n is not None:
                cut = max(0, len(context) - n)
                self.penalties.push_source(context[:cut])
                context = context[cut:]
            self.penalties.push_context(context)
            for token in self.output_ids:
                self.penalties.push(token)
        return self.penalties

    def append(self, token: int, max_model_len: int) -> Output:
        """Take one sampled token: update text, check every stop condition, report."""
        p = self.params
        self.completion_tokens += 1
        self.last_token = token
        may_stop = self.completion_tokens >= p.min_tokens
        if token in self.eos_ids and not p.ignore_eos and may_stop:
            # stop: eos sampled
            return self._finish("", "stop", None)
        if token in p.stop_token_ids and may_stop:
            # stop: a stop token id sampled
            return self._finish("", "stop", token)
        if self.grammar is not None:
            self.grammar.consume(token)
        self.output_ids.append(token)
        if self._seen is not None and 0 <= token < self._seen.shape[0]:
            self._seen[token] = True
        if self.penalties is not None:
            self.penalties.push(token)
        shown, match = self.matcher.feed(self.detok.push([token]), check=may_stop)
        if match is not None:
            # stop: a stop string completed (possibly across tokens)
            return self._finish(match.text, "stop", match.stop, flush=False)
        out = Output(self.request_id, shown, [token])
        if self.grammar is not None and self.grammar.done:
            # stop: the constraint's output is complete (nothing more is allowed)
            return self._finish(shown, "stop", None)
        if self.completion_tokens - self.round_start >= p.max_tokens:
            # stop: max_tokens reached (a held sequence parks with its text state intact)
            if self.hold and self.total_len < max_model_len:
                return self._park(shown)
            return self._finish(shown, "length", None)
        if self.total_len >= max_model_len:
            # stop: the context window is full
            return self._finish(shown, "length", None)
        return out

    def _park(self, shown: str) -> Output:
        self.status = Status.PARKED
        self.finish_reason, self.stop_reason = "length", None
        out = self._report(shown, [self.last_token] if self.last_token is not None else [])
        out.parked = True
        return out

    def resume(self, max_tokens: int) -> int:
        """Start another round of up to max_tokens; returns the tokens it carries over."""
        if self.status is not Status.PARKED:
            raise ValueError(f"request {self.request_id} is {self.status.value}, not parked")
        self.params = replace(self.params, max_tokens=max_tokens, min_tokens=0)
        self.round_start = self.completion_tokens
        self.status = Status.RUNNING
        self.finish_reason = None
        self.cached_prompt_tokens = self.total_len
        self.reserved_tokens = self.total_len + max_tokens
        return self.cached_prompt_tokens

    def release(self) -> Output:
        """End a parked sequence: the text still held back is released."""
        return self._finish("", "length", None)

    def abort(self) -> Output:
        return self._finish("", "abort", None)

    def _finish(
        self, shown: str, reason: str, stop_reason: int | str | None, flush: bool = True
    ) -> Output:
        if flush:
            tail, match = self.matcher.feed(self.detok.flush(), check=True)
            if match is not None:
                shown += match.text
                reason, stop_reason = "stop", match.stop
            else:
                shown += tail + self.matcher.flush()
        was_parked = self.status is Status.PARKED
        self.status = Status.FINISHED
        self.finish_reason = reason
        self.stop_reason = stop_reason
        # ids reported are the ones added to output_ids: not a final EOS / stop token,
        # and not the last token of a parked round again
        appended = (reason == "length" or isinstance(stop_reason, str)) and not was_parked
        return self._report(
            shown, [self.last_token] if appended and self.last_token is not None else []
        )

    def _report(self, shown: str, tokens: list[int]) -> Output:
        """A finishing Output for this round; token counts are the round's own."""
        return Output(
            self.request_id,
            shown,
            tokens,
            finished=True,
            finish_reason=self.finish_reason,
            stop_reason=self.stop_reason,
            prompt_tokens=len(self.prompt_ids) + self.round_start,
            completion_tokens=self.completion_tokens - self.round_start,
            cached_prompt_tokens=self.cached_prompt_tokens,
        )
