"""Per-request generation settings (what to sample and when to stop), and the one builder of
them from any source: CLI flags, a pipeline's settings, an HTTP body. Torch-free.

Frequency/presence and the no-repeat n-gram ban look at the request's generated ids only,
over every round of a parked and resumed request (copying a phrase of the prompt, such as
a document's topic, is legitimate). DRY, as in llama.cpp, looks at the prompt too, unless
`dry_prompt_tokens` limits it to the prompt's last N ids: a pipeline gives it only the
answer a round goes on with (its own text), so figures and names copied from the prompt
are never penalised; the rest of the prompt is the source DRY lets a repeat go on copying
(a figure said a second time in the answer goes on as the prompt has it, and is not bent).
`repetition_penalty`, as in Hugging Face, includes the prompt.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

MAX_LOGPROBS = 20  # alternatives per token the engine reports at most
GREEDY_BELOW = 1e-5  # a temperature this small is greedy (dividing by it overflows float32)


class InvalidParam(ValueError):
    """A setting out of range; `param` names it (the HTTP server's 400 says which)."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param


def _check(ok: bool, param: str, message: str) -> None:
    if not ok:
        raise InvalidParam(param, message)


CONSTRAINT_KINDS = ("json_schema", "regex", "lark", "gbnf")


@dataclass(frozen=True, slots=True)
class Constraint:
    """Output the engine enforces token by token: a JSON schema (as JSON text), a regular
    expression, or a grammar in Lark or GBNF. `prefix`: output already written under it (a
    round that goes on after its text was cut back) that the grammar reads first."""

    kind: str
    text: str
    prefix: str = ""

    def __post_init__(self) -> None:
        _check(
            self.kind in CONSTRAINT_KINDS,
            "constraint",
            f"a constraint is one of {', '.join(CONSTRAINT_KINDS)}, got {self.kind!r}",
        )


@dataclass(frozen=True, slots=True)
class SamplingParams:
    max_tokens: int = 256
    temperature: float = 1.0  # 0 (below GREEDY_BELOW) means greedy
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
    # how many of the prompt's last ids DRY reads; None: all of them (llama.cpp), 0: none
    dry_prompt_tokens: int | None = None
    # OpenAI's logit_bias: (token id, bias in [-100, 100]) pairs added to the logits
    logit_bias: tuple[tuple[int, float], ...] = ()
    seed: int | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    include_stop_str_in_output: bool = False
    min_tokens: int = 0
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    # None: no log probabilities; 0: the sampled token's; k: and the k most likely tokens'
    # (of the distribution the model gave, before penalties, temperature and filters)
    logprobs: int | None = None
    constraint: Constraint | None = None  # output held to a schema, regex or grammar

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            object.__setattr__(self, "stop", (self.stop,))
        else:
            object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "stop_token_ids", tuple(self.stop_token_ids))
        bias = self.logit_bias.items() if isinstance(self.logit_bias, dict) else self.logit_bias
        object.__setattr__(self, "logit_bias", tuple((int(t), float(b)) for t, b in bias))
        for token, value in self.logit_bias:
            _check(
                token >= 0 and -100 <= value <= 100,
                "logit_bias",
                f"logit_bias needs token ids >= 0 and biases in [-100, 100], got {token}: {value}",
            )
        breakers = self.dry_sequence_breakers
        breakers = (breakers,) if isinstance(breakers, str) else tuple(breakers)
        object.__setattr__(self, "dry_sequence_breakers", breakers)
        self._check_ranges()

    def _check_ranges(self) -> None:
        _check(
            self.max_tokens >= 1, "max_tokens", f"max_tokens must be >= 1, got {self.max_tokens}"
        )
        _check(
            self.temperature >= 0,
            "temperature",
            f"temperature must be >= 0, got {self.temperature}",
        )
        _check(self.top_k >= 0, "top_k", f"top_k must be >= 0, got {self.top_k}")
        _check(0 < self.top_p <= 1, "top_p", f"top_p must be in (0, 1], got {self.top_p}")
        _check(0 <= self.min_p <= 1, "min_p", f"min_p must be in [0, 1], got {self.min_p}")
        _check(
            self.repetition_penalty > 0,
            "repetition_penalty",
            f"repetition_penalty must be > 0, got {self.repetition_penalty}",
        )
        for name in ("frequency_penalty", "presence_penalty"):
            value = getattr(self, name)
            _check(-2 <= value <= 2, name, f"{name} must be in [-2, 2], got {value}")
        _check(
            self.no_repeat_ngram_size == 0 or self.no_repeat_ngram_size >= 2,
            "no_repeat_ngram_size",
            "no_repeat_ngram_size must be 0 (off) or >= 2 (1 would ban every generated "
            f"token), got {self.no_repeat_ngram_size}",
        )
        _check(
            self.dry_multiplier >= 0,
            "dry_multiplier",
            f"dry_multiplier must be >= 0, got {self.dry_multiplier}",
        )
        _check(self.dry_base > 1, "dry_base", f"dry_base must be > 1, got {self.dry_base}")
        _check(
            self.dry_allowed_length >= 1,
            "dry_allowed_length",
            f"dry_allowed_length must be >= 1, got {self.dry_allowed_length}",
        )
        _check(
            self.dry_penalty_last_n >= 0,
            "dry_penalty_last_n",
            f"dry_penalty_last_n must be >= 0 (0: all generated tokens), "
            f"got {self.dry_penalty_last_n}",
        )
        _check(
            self.dry_prompt_tokens is None or self.dry_prompt_tokens >= 0,
            "dry_prompt_tokens",
            f"dry_prompt_tokens must be >= 0 (or None: the whole prompt), "
            f"got {self.dry_prompt_tokens}",
        )
        _check(
            all(self.dry_sequence_breakers),
            "dry_sequence_breakers",
            "dry_sequence_breakers must not hold an empty string (it would break at every token)",
        )
        _check(
            0 <= self.min_tokens <= self.max_tokens,
            "min_tokens",
            f"min_tokens must be in [0, max_tokens={self.max_tokens}], got {self.min_tokens}",
        )
        _check(all(self.stop), "stop", "stop strings must not be empty")
        _check(
            all(t >= 0 for t in self.stop_token_ids),
            "stop_token_ids",
            f"stop_token_ids must be >= 0, got {list(self.stop_token_ids)}",
        )
        _check(
            self.logprobs is None or 0 <= self.logprobs <= MAX_LOGPROBS,
            "logprobs",
            f"logprobs must be in [0, {MAX_LOGPROBS}], got {self.logprobs}",
        )

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_BELOW

    @property
    def has_penalties(self) -> bool:
        """Is any penalty over the generated ids on (frequency/presence, n-gram, DRY)?"""
        return bool(
            self.frequency_penalty
            or self.presence_penalty
            or self.no_repeat_ngram_size
            or self.dry_multiplier
        )


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """A generated token's log probability and the `logprobs` most likely tokens' at its
    step, most likely first."""

    token_id: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


FIELDS: tuple[str, ...] = tuple(f.name for f in fields(SamplingParams))


def build_sampling_params(
    source: Mapping[str, Any] | object = None, /, **overrides: Any
) -> SamplingParams:
    """SamplingParams from any source of settings: a mapping (an HTTP body, a pipeline's
    settings dumped) or an object with attributes (argparse's Namespace, a pydantic model).
    Only SamplingParams' own field names are read, other names are ignored; a None value
    means the field's default; `overrides` (same names) win over the source. Raises
    InvalidParam, a ValueError that names the field, for a value out of range."""
    if source is None:
        values: dict[str, Any] = {}
    elif isinstance(source, Mapping):
        values = {k: source[k] for k in FIELDS if k in source}
    else:
        values = {k: getattr(source, k) for k in FIELDS if hasattr(source, k)}
    unknown = set(overrides) - set(FIELDS)
    if unknown:
        raise TypeError(f"SamplingParams has no field {', '.join(sorted(unknown))}")
    values.update(overrides)
    return SamplingParams(**{k: v for k, v in values.items() if v is not None})
