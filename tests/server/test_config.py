"""ServerConfig and RunLimits: the server's settings, checked when built, the environment
read once in from_env; `gen serve` names a bad one by its option (exit 2, no traceback)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gen.cli import main
from gen.server.config import RunLimits, ServerConfig, SettingError


def test_nothing_set_gives_the_defaults() -> None:
    config = ServerConfig.from_env({})
    assert config == ServerConfig(loopback_only=True)  # bound to loopback: guarded
    assert (config.host, config.port, config.api_key, config.fault_marker) == (
        "127.0.0.1",
        8000,
        None,
        None,
    )
    assert config.runs == RunLimits(max_runs=2, max_waiting=16, max_watchers=256)
    assert (config.out, config.pipelines) == (Path("outputs"), Path("pipelines"))


def test_the_environment_is_read_and_what_is_given_wins() -> None:
    env = {"GEN_API_KEY": "from-env", "GEN_SERVE_FAULT": "boom"}
    config = ServerConfig.from_env(env)
    assert (config.api_key, config.fault_marker) == ("from-env", "boom")
    assert ServerConfig.from_env(env, api_key="given").api_key == "given"
    assert ServerConfig.from_env(env, api_key="").api_key == "from-env"  # empty: not given
    given = ServerConfig.from_env(env, max_queue=3, port=None)
    assert (given.max_queue, given.port) == (3, 8000)  # None: not given


def test_loopback_only_follows_the_host() -> None:
    assert ServerConfig.from_env({}, host="::1").loopback_only
    public = ServerConfig.from_env({"GEN_API_KEY": "k"}, host="0.0.0.0")
    assert not public.loopback_only
    # in process (a test's http://test) the guard is off unless asked for
    assert not ServerConfig().loopback_only


def test_a_public_bind_needs_a_key() -> None:
    with pytest.raises(ValueError, match=r"refusing to serve on 0\.0\.0\.0 without an API key"):
        ServerConfig.from_env({}, host="0.0.0.0")
    assert ServerConfig(host="0.0.0.0", api_key="k").api_key == "k"


def test_the_config_is_frozen() -> None:
    config = ServerConfig()
    with pytest.raises(AttributeError):
        config.max_queue = 2  # type: ignore[misc]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"port": -1}, "port must be in 0..65535, got -1"),
        ({"port": 65536}, "port must be in 0..65535, got 65536"),
        ({"max_queue": 0}, "max_queue must be positive, got 0"),
        ({"max_body_bytes": 0}, "max_body_bytes must be positive, got 0"),
        ({"body_timeout": -1.0}, "body_timeout must be positive, got -1.0"),
        ({"sse_ping": float("nan")}, "sse_ping must be positive, got nan"),
    ],
)
def test_a_bad_setting_is_named(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(SettingError, match=re.escape(message)) as caught:
        ServerConfig(**settings)
    assert caught.value.name == next(iter(settings))


@pytest.mark.parametrize("name", ["max_runs", "max_waiting", "max_watchers"])
def test_a_bad_run_limit_is_named(name: str) -> None:
    with pytest.raises(SettingError, match=f"{name} must be positive, got 0"):
        RunLimits(**{name: 0})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-run-queue", "0"], "error: --max-run-queue must be positive, got 0"),
        (["--max-runs", "-2"], "error: --max-runs must be positive, got -2"),
        (["--max-watchers", "0"], "error: --max-watchers must be positive, got 0"),
        (["--max-queue", "0"], "error: --max-queue must be positive, got 0"),
        (["--max-body-mb", "-1"], "error: --max-body-mb must be positive, got -1.0"),
        (["--max-body-mb", "nan"], "error: --max-body-mb must be positive, got nan"),
        (["--body-timeout", "0"], "error: --body-timeout must be positive, got 0.0"),
        (["--sse-ping", "0"], "error: --sse-ping must be positive, got 0.0"),
        (["--port", "70000"], "error: --port must be in 0..65535, got 70000"),
        (["--max-slots", "0"], "error: --max-slots must be positive, got 0"),
        (["--max-model-len", "0"], "error: --max-model-len must be positive, got 0"),
        (["--host", "0.0.0.0"], "error: refusing to serve on 0.0.0.0 without an API key"),
    ],
)
def test_gen_serve_names_a_bad_option(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    monkeypatch.delenv("GEN_API_KEY", raising=False)
    assert main(["serve", *args]) == 2  # before any model loads
    err = capsys.readouterr().err
    assert err.startswith(message) and "Traceback" not in err, err
