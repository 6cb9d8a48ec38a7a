"""Fixtures of the integration tests: each storage a sweep supports, for the tests of the storage contract."""

from __future__ import annotations

from pathlib import Path

import pytest

from ladder.storage import studies


@pytest.fixture(params=["journal", "postgresql"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The journal file in a sweep folder, and a PostgreSQL database (skipped, with the reason, only where no server
    can be started): each storage the sweep supports."""
    if request.param == "postgresql":
        return str(request.getfixturevalue("pg_url"))
    studies.open_storage(None, tmp_path)
    return str(tmp_path)
