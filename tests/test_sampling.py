"""build_sampling_params: one builder for flags, settings and HTTP bodies; and the module
stays torch-free."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from gen.sampling import InvalidParam, SamplingParams, build_sampling_params


def test_from_a_mapping_with_nulls_meaning_defaults() -> None:
    body = {"temperature": 0.3, "top_p": None, "stop": ["a", "b"], "model": "x", "n": 1}
    p = build_sampling_params(body, max_tokens=9)
    assert p == SamplingParams(temperature=0.3, stop=("a", "b"), max_tokens=9)


def test_from_an_object_and_overrides_win() -> None:
    args = argparse.Namespace(temperature=0.0, seed=4, max_tokens=5, json=True)
    assert build_sampling_params(args, seed=None) == SamplingParams(temperature=0.0, max_tokens=5)
    assert build_sampling_params() == SamplingParams()


def test_an_unknown_override_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="tempreature"):
        build_sampling_params({}, tempreature=1.0)


@pytest.mark.parametrize(
    ("settings", "param"),
    [
        ({"top_p": 0}, "top_p"),
        ({"min_tokens": 5, "max_tokens": 2}, "min_tokens"),
        ({"logit_bias": {"3": 500}}, "logit_bias"),
        ({"stop": [""]}, "stop"),
        ({"logprobs": 21}, "logprobs"),
    ],
)
def test_an_out_of_range_value_names_its_field(settings: dict[str, object], param: str) -> None:
    with pytest.raises(InvalidParam) as caught:
        build_sampling_params(settings)
    assert caught.value.param == param and isinstance(caught.value, ValueError)


def test_a_tiny_temperature_is_greedy() -> None:
    assert SamplingParams(temperature=1e-7).greedy and not SamplingParams(temperature=1e-3).greedy


def test_the_shared_value_types_import_no_torch() -> None:
    code = (
        "import sys, gen.sampling, gen.home, gen.backends.openai, gen.backends.collect,"
        " gen.server.openai.requests, gen.server.openai.responses, gen.server.openapi;"
        " print('torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
