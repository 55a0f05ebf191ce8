"""Fixtures shared by the engine's tests."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest


@pytest.fixture(params=["avx2", "avx512"])
def isa(k: ModuleType, request: pytest.FixtureRequest) -> Iterator[str]:
    """The kernels (the test module's `k`) run their products on each instruction set the
    CPU takes, in turn; one it does not take is skipped."""
    try:
        before = k.use_isa(request.param)
    except RuntimeError as exc:
        pytest.skip(f"{request.param}: {exc}")
    yield request.param
    k.use_isa(before)
