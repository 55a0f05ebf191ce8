"""Under `make soak`, every failed test is counted in the soak summary."""

from __future__ import annotations

import pytest

from tests.reliability.soak import record


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed:
        record("failures")
