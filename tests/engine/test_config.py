"""EngineConfig: the engine's settings, read from the environment once where gen starts."""

from __future__ import annotations

import pytest

from gen.engine.config import PREFIX_CACHE_BYTES, EngineConfig
from gen.errors import ConfigError


def test_nothing_set_gives_the_defaults() -> None:
    assert EngineConfig.from_env({}) == EngineConfig()
    assert EngineConfig().prefix_cache_bytes == PREFIX_CACHE_BYTES
    # dtype None: the model's own (gguf for a GGUF file, float32 otherwise: load_model)
    assert (EngineConfig().dtype, EngineConfig().kernels, EngineConfig().kv_budget_bytes) == (
        None,
        True,
        None,
    )


def test_the_environment_is_read_and_what_is_given_wins() -> None:
    env = {
        "GEN_DTYPE": "int8",
        "GEN_KERNELS": "0",
        "GEN_KV_BUDGET_MB": "1.5",
        "GEN_PREFIX_CACHE_MB": "0",
    }
    config = EngineConfig.from_env(env)
    assert config == EngineConfig(
        dtype="int8", kernels=False, kv_budget_bytes=3 * 2**19, prefix_cache_bytes=0
    )
    # avx2 keeps the kernels on (the kernels read it themselves: no AVX-512 products)
    assert EngineConfig.from_env({"GEN_KERNELS": "avx2"}).kernels is True
    given = EngineConfig.from_env(env, dtype="float32", max_slots=4, max_model_len=None)
    assert (given.dtype, given.max_slots, given.max_model_len) == ("float32", 4, None)
    assert given.kv_budget_bytes == config.kv_budget_bytes  # not given: the environment's


def test_the_config_is_frozen() -> None:
    config = EngineConfig()
    with pytest.raises(AttributeError):
        config.max_slots = 2  # type: ignore[misc]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"GEN_DTYPE": "bf16"}, "GEN_DTYPE must be one of float32, gguf, q8, int8, got 'bf16'"),
        ({"GEN_KV_BUDGET_MB": "lots"}, "GEN_KV_BUDGET_MB must be a number of megabytes"),
        ({"GEN_KV_BUDGET_MB": "0"}, "GEN_KV_BUDGET_MB must be a number of megabytes, more than 0"),
        ({"GEN_KV_BUDGET_MB": "nan"}, "GEN_KV_BUDGET_MB"),
        ({"GEN_KV_BUDGET_MB": "1e300"}, "GEN_KV_BUDGET_MB"),
        ({"GEN_PREFIX_CACHE_MB": "-1"}, "GEN_PREFIX_CACHE_MB must be a number of megabytes, 0 or"),
        ({"GEN_PREFIX_CACHE_MB": "inf"}, "GEN_PREFIX_CACHE_MB"),
        ({"GEN_KERNELS": "avx512"}, "GEN_KERNELS must be one of 0, 1, avx2, got 'avx512'"),
    ],
)
def test_a_bad_environment_value_names_its_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        EngineConfig.from_env(env)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"dtype": "float16"}, "dtype 'float16' is not one of float32, gguf, q8, int8"),
        ({"max_slots": 0}, "max_slots must be at least 1, got 0"),
        ({"prefill_chunk": -3}, "prefill_chunk must be at least 1, got -3"),
        ({"max_model_len": 1}, "max_model_len must be at least 2, got 1"),
        ({"prefix_cache_bytes": -1}, "prefix_cache_bytes must be >= 0"),
        ({"kv_budget_bytes": 0}, "kv_budget_bytes must be positive"),
    ],
)
def test_bad_settings_are_refused(given: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        EngineConfig(**given)  # type: ignore[arg-type]


def test_gen_run_names_a_bad_environment_value_without_a_traceback(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gen.cli import main

    monkeypatch.setenv("GEN_KV_BUDGET_MB", "a lot")
    code = main(["generate", "你好", "--max-tokens", "4"])
    err = capsys.readouterr().err
    assert code == 2
    assert "GEN_KV_BUDGET_MB must be a number of megabytes" in err and "Traceback" not in err
