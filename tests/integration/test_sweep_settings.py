"""A sweep's recorded settings come back from either storage (a journal file, a real PostgreSQL)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ladder.core.paths import SweepPaths
from ladder.settings import recorded as sweepsettings
from ladder.settings.config import SettingsChange
from ladder.storage import studies
from ladder.sweep import resume
from tests.unit.test_sweep_settings import CASE, keys, settings


@pytest.mark.parametrize("backend", ["journal", "postgresql"])
def test_the_record_refuses_or_comes_back_from_either_storage(tmp_path: Path, backend: str, request) -> None:
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else None
    sweep_dir = tmp_path / "case_gpu_bench_s"
    first = settings("workload.emulate_gpu_mem_gb=0.8", "profile=[default]")
    study = studies.open_study(studies.open_storage(url, sweep_dir), CASE, "s")
    studies.save_settings(study, sweepsettings.record(first))
    loc = (f"storage={url}",) if url else ()
    again = settings("workload.emulate_gpu_mem_gb=0.6", *loc, given=("workload.emulate_gpu_mem_gb", *keys(*loc)))
    with pytest.raises(sweepsettings.SettingsChanged) as err:
        resume.recorded_for(again, SweepPaths("s", sweep_dir))
    assert "settings_change=accept" in str(err.value) and "sweep=<another name>" in str(err.value)
    if url:
        assert "s3cret" not in str(err.value)
    silent = settings(*loc, given=keys(*loc))
    back = resume.recorded_for(silent, SweepPaths("s", sweep_dir))
    assert back.workload.emulate_gpu_mem_gb == 0.8 and [p.name for p in back.profiles] == ["default"]
    accepted = dataclasses.replace(again, settings_change=SettingsChange.ACCEPT)
    assert resume.recorded_for(accepted, SweepPaths("s", sweep_dir)).workload.emulate_gpu_mem_gb == 0.6
