"""One request's state: its ids, sampling settings, stop handling and streamed text."""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass

import torch

from gen.engine.detokenizer import Detokenizer, Tokenizer
from gen.engine.sampling_params import SamplingParams
from gen.engine.stopping import StopStringMatcher

_ids = itertools.count()


class Status(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
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


class Sequence:
    def __init__(
        self,
        prompt_ids: list[int],
        params: SamplingParams,
        tokenizer: Tokenizer,
        eos_ids: tuple[int, ...],
        request_id: str | None = None,
    ) -> None:
        if not prompt_ids:
            raise ValueError("prompt must hold at least one token")
        self.request_id = request_id or f"req-{next(_ids)}"
        self.prompt_ids = list(prompt_ids)
        self.params = params
        self.eos_ids = eos_ids
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
        self.output_ids.append(token)
        shown, match = self.matcher.feed(self.detok.push([token]), check=may_stop)
        if match is not None:
            # stop: a stop string completed (possibly across tokens)
            return self._finish(match.text, "stop", match.stop, flush=False)
        out = Output(self.request_id, shown, [token])
        if self.completion_tokens >= p.max_tokens:
            # stop: max_tokens reached
            return self._finish(shown, "length", None)
        if self.total_len >= max_model_len:
            # stop: the context window is full
            return self._finish(shown, "length", None)
        return out

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
        self.status = Status.FINISHED
        self.finish_reason = reason
        self.stop_reason = stop_reason
        # ids reported are the ones added to output_ids: not a final EOS / stop token
        appended = reason == "length" or isinstance(stop_reason, str)
        tokens = [self.last_token] if appended and self.last_token is not None else []
        return Output(
            self.request_id,
            shown,
            tokens,
            finished=True,
            finish_reason=reason,
            stop_reason=stop_reason,
            prompt_tokens=len(self.prompt_ids),
            completion_tokens=self.completion_tokens,
            cached_prompt_tokens=self.cached_prompt_tokens,
        )
