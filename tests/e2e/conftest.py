"""Fixtures of the end-to-end tests."""

from __future__ import annotations

import pytest

from tests.e2e.mimickit_sweeps import require_mimickit


@pytest.fixture(scope="module")
def mimickit_ready() -> None:
    """The real MimicKit can run here (else the module is skipped, or fails under CI)."""
    require_mimickit()
