"""A round's SamplingParams: the section's own settings; a retry after a loop samples with
another seed, stronger DRY, a little hotter, and the words its loops leaned on made less
likely. DRY reads the section's own text only, never the prompt, the sources or earlier
sections: a figure, a name or a quotation copied from them is not a loop."""

from __future__ import annotations

from collections.abc import Callable

from gen.pipeline.run.rounds import Rounds
from gen.pipeline.spec import GenerationSettings
from gen.sampling import Constraint, SamplingParams, build_sampling_params

# a retry makes the word a refrain leans on this much less likely (a logit bias)
RETRY_BIAS = -6.0
# a section that stopped short writes on past its end for at least this many tokens
EXTEND_MIN_TOKENS = 64


def sampling(
    settings: GenerationSettings,
    max_tokens: int,
    *,
    seed: int | None = None,
    stop: tuple[str, ...] = (),
    retry: int = 0,
    strength: int = 0,
    bias: tuple[tuple[int, float], ...] = (),
    least: int = 0,
    constraint: Constraint | None = None,
    warm: float = 0.0,
    own_tokens: int = 0,
) -> SamplingParams:
    """The round's SamplingParams; the n-th retry after a loop samples with seed + n, and
    with DRY 1.5**strength times stronger (strength: retries in a row without progress);
    `warm`: the least temperature (a refused list item is sampled again); `own_tokens`:
    the tokens at the prompt's end that are the section's own text (the answer a prefix
    round goes on with), the only part of the prompt DRY reads."""
    dry, temperature = settings.dry_multiplier, max(settings.temperature, warm)
    if retry:
        seed = None if seed is None else seed + retry
    if strength:  # (a frequency penalty would soon ban "." and "the" from a long text)
        dry = max(dry, 0.8) * 1.5**strength
        if temperature:
            temperature = max(temperature, min(1.0, temperature + 0.15 * strength))
    return build_sampling_params(
        settings,
        max_tokens=max_tokens,
        temperature=temperature,
        dry_multiplier=dry,
        dry_prompt_tokens=own_tokens,
        logit_bias=bias,
        seed=seed,
        stop=(*settings.stop, *stop),
        # a request's min_tokens may not pass its max_tokens, so a least longer than the
        # first kv round is cut to it (the engine counts it over all the request's rounds)
        min_tokens=min(max(settings.min_tokens, least), max_tokens),
        constraint=constraint,
    )


def retry_bias(
    state: Rounds, word_ids: Callable[[str], list[int]]
) -> tuple[tuple[int, float], ...]:
    """A retry makes the words its loops leaned on less likely (while its stronger
    settings last)."""
    if not state.strong:
        return ()
    ids = {i for word in state.avoid for i in word_ids(word)}
    return tuple((i, RETRY_BIAS) for i in sorted(ids))
