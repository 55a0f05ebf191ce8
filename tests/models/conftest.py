"""Fixtures of the model tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def gen_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """GEN_HOME (converted models, caches) under the test's own folder."""
    home = tmp_path / "gen-home"
    monkeypatch.setenv("GEN_HOME", str(home))
    return home
