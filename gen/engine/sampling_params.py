"""Per-request generation settings (what to sample and when to stop).

Frequency/presence and the no-repeat n-gram ban look at the request's generated ids only,
over every round of a parked and resumed request (copying a phrase of the prompt, such as
a document's topic, is legitimate). DRY, as in llama.cpp, looks at the prompt too: a round
that re-sends the text written so far must not loop back into it. `repetition_penalty`,
as in Hugging Face, includes the prompt.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SamplingParams:
    max_tokens: int = 256
    temperature: float = 1.0  # 0 means greedy
    top_k: int = 0  # 0 disables
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    # OpenAI: logits[t] -= frequency_penalty * count(t) + presence_penalty * (count(t) > 0)
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    # ban a token that would complete an n-gram already generated (0: off); unlike
    # transformers' NoRepeatNGramLogitsProcessor the prompt's n-grams are not banned
    no_repeat_ngram_size: int = 0
    # DRY (llama.cpp, koboldcpp): a token that would extend a repeat of L >= allowed_length
    # tokens (of the prompt and the output) loses multiplier * base ** (L - allowed_length);
    # a match never spans a breaker (an id whose text contains a breaker string).
    # penalty_last_n: 0 searches every token, else the last N only.
    dry_multiplier: float = 0.0  # 0 disables
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    dry_sequence_breakers: tuple[str, ...] = ("\n", ":", '"', "*")
    dry_penalty_last_n: int = 0
    # OpenAI's logit_bias: (token id, bias in [-100, 100]) pairs added to the logits
    logit_bias: tuple[tuple[int, float], ...] = ()
    seed: int | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    include_stop_str_in_output: bool = False
    min_tokens: int = 0
    ignore_eos: bool = False
    skip_special_tokens: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            object.__setattr__(self, "stop", (self.stop,))
        else:
            object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "stop_token_ids", tuple(self.stop_token_ids))
        bias = self.logit_bias.items() if isinstance(self.logit_bias, dict) else self.logit_bias
        object.__setattr__(self, "logit_bias", tuple((int(t), float(b)) for t, b in bias))
        for token, value in self.logit_bias:
            if token < 0 or not -100 <= value <= 100:
                raise ValueError(
                    f"logit_bias needs token ids >= 0 and biases in [-100, 100], got "
                    f"{token}: {value}"
                )
        breakers = self.dry_sequence_breakers
        breakers = (breakers,) if isinstance(breakers, str) else tuple(breakers)
        object.__setattr__(self, "dry_sequence_breakers", breakers)
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if not 0 <= self.min_p <= 1:
            raise ValueError(f"min_p must be in [0, 1], got {self.min_p}")
        if self.repetition_penalty <= 0:
            raise ValueError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")
        for name in ("frequency_penalty", "presence_penalty"):
            value = getattr(self, name)
            if not -2 <= value <= 2:
                raise ValueError(f"{name} must be in [-2, 2], got {value}")
        if self.no_repeat_ngram_size < 0 or self.no_repeat_ngram_size == 1:
            raise ValueError(
                "no_repeat_ngram_size must be 0 (off) or >= 2 (1 would ban every generated "
                f"token), got {self.no_repeat_ngram_size}"
            )
        if not self.dry_multiplier >= 0:
            raise ValueError(f"dry_multiplier must be >= 0, got {self.dry_multiplier}")
        if not self.dry_base > 1:
            raise ValueError(f"dry_base must be > 1, got {self.dry_base}")
        if self.dry_allowed_length < 1:
            raise ValueError(f"dry_allowed_length must be >= 1, got {self.dry_allowed_length}")
        if self.dry_penalty_last_n < 0:
            raise ValueError(
                f"dry_penalty_last_n must be >= 0 (0: all generated tokens), "
                f"got {self.dry_penalty_last_n}"
            )
        if any(not s for s in self.dry_sequence_breakers):
            raise ValueError(
                "dry_sequence_breakers must not hold an empty string (it would break at "
                "every token)"
            )
        if not 0 <= self.min_tokens <= self.max_tokens:
            raise ValueError(
                f"min_tokens must be in [0, max_tokens={self.max_tokens}], got {self.min_tokens}"
            )
        if any(not s for s in self.stop):
            raise ValueError("stop strings must not be empty")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def has_penalties(self) -> bool:
        """Is any penalty over the generated ids on (frequency/presence, n-gram, DRY)?"""
        return bool(
            self.frequency_penalty
            or self.presence_penalty
            or self.no_repeat_ngram_size
            or self.dry_multiplier
        )
