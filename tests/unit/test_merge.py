"""Shared results: concurrent writers lose no row, `python -m ladder.merge` merges machines' files by the same rule,
and trials.tsv is rebuilt from the storage alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from ladder.merge import main as merge_main
from ladder.storage import tsv
from ladder.storage.tsv import read_tsv, write_best

WRITERS, ROWS_EACH = 8, 12


def row(case: str, gpu: str, status: str, e: int, at: str, host: str) -> dict[str, str]:
    mem = {"cpu": "614", "RTX 4090": "24564", "H100": "81559"}[gpu]
    return {
        "case": case,
        "method": "amp",
        "variant": "hiutil",
        "num_envs": str(e),
        "status": status,
        "min_avg_util": "51.5" if status == "ok" else "",
        "max_mem0": "20000",
        "max_mem1": "20100",
        "gpu_name": gpu,
        "gpu_mem_total": mem,
        "n_gpus": "2",
        "host": host,
        "sweep": host,
        "finished_at": at,
    }


# ---------------------------------------------------------------- damaged files, rebuilt from storage

DAMAGE = {
    "truncated_mid_row": lambda b: b[: len(b) - 30],
    "random_bytes": lambda b: bytes(range(128, 256)) * 4,
    "nul": lambda b: b[:40] + b"\x00" + b[40:],
    "extra_field": lambda b: b[: b.index(b"\n") + 1] + b[b.index(b"\n") + 1 :].replace(b"\n", b"\tx\n"),
    "no_newline": lambda b: b[:-1],
}


@pytest.mark.parametrize("damage", list(DAMAGE), ids=list(DAMAGE))
def test_read_tsv_names_a_damaged_file_instead_of_crashing(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "best_by_case.tsv"
    write_best(
        path,
        [
            row("amp_pi_plus", "cpu", "ok", 64, "2026-01-01T00:00:00", "a"),
            row("add_pi_plus", "cpu", "ok", 32, "2026-01-01T00:00:00", "a"),
        ],
    )
    path.write_bytes(DAMAGE[damage](path.read_bytes()))
    with pytest.raises(tsv.TsvError, match=f"{path} is damaged") as err:
        read_tsv(path)
    assert "--best-from-storage" in str(err.value)


def test_a_header_alone_reads_as_no_rows(tmp_path: Path) -> None:
    tsv.write_trials(tmp_path / "trials.tsv", [])
    assert read_tsv(tmp_path / "trials.tsv") == []


def test_the_command_without_out_shows_its_three_forms(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        merge_main([])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "give OUT: the file to write" in err
    assert "OUT IN [IN ...]" in err and "--trials-from-storage STORAGE" in err and "--best-from-storage" in err
