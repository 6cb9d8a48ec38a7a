"""Progress readers on real-format files, and the window gate on a real proxy run."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from ladder.core.errors import ConfigError
from ladder.core.measure.steps import step_times
from ladder.core.measure.window import Rule, stable_start
from ladder.core.records import Point
from ladder.workloads.progress import (
    Follow,
    JsonlProgress,
    MimicKitLogParser,
    compile_pattern,
    numbered,
    parse_line,
    parser_for,
    read_all,
    reader_for,
)
from tests.helpers import DATA

PROGRESS = DATA / "progress"
MIMICKIT_PER_ITER = 2 * 4096 * 32  # the sample files: 2 processes × 4096 envs × 32 steps per iteration
SEED_003_RULE = Rule(warmup_iters=120, stable_k=5, stable_tol=0.25, data_time_max_s=0.02)


def copy_with_mtime(name: str, tmp_path: Path, mtime: float) -> Path:
    path = tmp_path / name
    path.write_bytes((PROGRESS / name).read_bytes())
    os.utime(path, (mtime, mtime))
    return path


def append(path: Path, data: bytes, mtime: float) -> None:
    """What a trainer does: append, and the file's modification time says when."""
    with open(path, "ab") as fh:
        fh.write(data)
    os.utime(path, (mtime, mtime))


# ---------------------------------------------------------------- JSON lines


def test_the_proxys_progress_file() -> None:
    points = read_all(PROGRESS / "proxy_progress.jsonl")
    first = json.loads((PROGRESS / "proxy_progress.jsonl").read_text().splitlines()[1])
    assert [p.iter for p in points] == list(range(1, 13))
    assert [p.samples for p in points] == [64 * 32 * 2 * i for i in range(1, 13)]
    assert points[0] == Point(first["t"], 1, 4096.0, first["step_time_s"], tuple(first["peak_mem_mb"]))


def test_seed_003_metrics_followed_as_the_trainer_writes_them(tmp_path: Path) -> None:
    rows = (PROGRESS / "metrics_steady.jsonl").read_bytes().splitlines(keepends=True)
    path, t0 = tmp_path / "metrics.jsonl", 1_771_500_000.0
    reader, points = JsonlProgress(path), []
    for i, row in enumerate(rows, start=1):
        append(path, row[:40], t0 + 10 * i - 5)  # half a line: nothing yet
        points += reader.read_new()
        append(path, row[40:], t0 + 10 * i)  # 10 iterations of ~1 s each per row
        points += reader.read_new()
    assert [p.iter for p in points] == list(range(10, 191, 10))
    assert [p.t for p in points] == [t0 + 10 * i for i in range(1, 20)]  # no time of their own: when written
    assert points[0].step_time_s == 3.2 and points[0].data_time_s == 0.0012  # iter_time, data_time
    assert stable_start(points, *SEED_003_RULE) == points[11].t  # iter 120: the seed's own gate


def test_seed_003_data_stalls_keep_the_window_shut() -> None:
    points = [parse_line(line, now=float(i)) for i, line in enumerate((PROGRESS / "metrics_data_stalls.jsonl").open())]
    steady = [p for p in points if p is not None]
    assert len(steady) == 9 and max(p.data_time_s or 0 for p in steady) == 6.5685
    rule = Rule(warmup_iters=10, stable_k=5, stable_tol=0.25)  # iter_time alone is steady (1.0-1.1 s) ...
    assert stable_start([Point(p.t, p.iter, 0, p.step_time_s) for p in steady], *rule) is not None
    assert stable_start(steady, *rule) is None  # ... but data times from ms to 6.5 s are not
    assert stable_start(steady, *SEED_003_RULE._replace(warmup_iters=10)) is None


# ---------------------------------------------------------------- MimicKit


def test_mimickit_log_txt_rows_and_their_times(tmp_path: Path) -> None:
    path = copy_with_mtime("mimickit_log.txt", tmp_path, 1_771_500_000.0)
    points = read_all(path, "mimickit_log")
    assert [p.iter for p in points] == list(range(0, 801, 100))
    assert [p.samples for p in points] == [(i + 1) * MIMICKIT_PER_ITER for i in range(0, 801, 100)]
    assert points[-1].t == pytest.approx(1_771_500_000.0)  # the newest row was written at the file's mtime
    steps = [s for s in step_times(points)[1:] if s is not None]
    assert steps == pytest.approx([0.956] * 8, abs=0.01)  # Wall_Time is in hours: ~0.93 s an iteration + tests
    assert points[0].t == pytest.approx(1_771_500_000.0 - 8 * 95.6, abs=3)


def test_mimickit_log_txt_with_a_known_start_and_rows_split_across_reads(tmp_path: Path) -> None:
    data = (PROGRESS / "mimickit_log.txt").read_bytes()
    path, reader = tmp_path / "log.txt", Follow(tmp_path / "log.txt", MimicKitLogParser(start_t=1000.0))
    got = []
    for cut in range(0, len(data), 997):  # reads that end mid-row
        append(path, data[cut : cut + 997], 5000.0)
        got += reader.read_new()
    wall_h = [float(row.split()[1]) for row in data.decode().split("\r")[1:-1]]
    assert [p.t for p in got] == pytest.approx([1000.0 + w * 3600 for w in wall_h])


def test_mimickit_stdout_table() -> None:
    points = read_all(PROGRESS / "mimickit_stdout.log", "mimickit_stdout")
    assert [p.iter for p in points] == list(range(12))
    assert [p.samples for p in points] == [(i + 1) * MIMICKIT_PER_ITER for i in range(12)]


# ---------------------------------------------------------------- regex


def test_cleanrl_sps_lines_with_the_batch_size() -> None:
    """CleanRL's ppo.py, run (4 envs x 128 steps): one `SPS:` line per iteration; the batch size counts them."""
    points = read_all(PROGRESS / "cleanrl_stdout.log", "regex", "cleanrl", samples_per_iter=4 * 128)
    assert [p.iter for p in points] == list(range(1, 21))
    assert [p.samples for p in points] == [512.0 * i for i in range(1, 21)]
    assert points[-1].sps == 281  # CleanRL's own SPS (a mean since its start), kept for reference


def test_cleanrl_without_a_batch_size_counts_its_global_steps() -> None:
    """No batch size: each SPS line counts the latest `global_step=` printed before it, a lower bound by less than
    one iteration's 512 steps."""
    points = read_all(PROGRESS / "cleanrl_stdout.log", "regex", "cleanrl")
    assert len(points) == 20
    assert [p.samples for p in points[:3]] == [484.0, 956.0, 1484.0] and points[-1].samples == 10212.0
    assert all(512.0 * (p.iter - 1) < p.samples <= 512.0 * p.iter for p in points)
    assert points[-1].sps == 281


def test_cleanrl_on_gymnasium_1_prints_only_its_rate() -> None:
    """The same ppo.py on gymnasium 1.x: its `final_info` check never holds, so no `global_step=` line; each SPS
    line is a point with no count, and its rate is the one figure (it stands for samples/s, recorded as such)."""
    points = read_all(PROGRESS / "cleanrl_gymnasium1_stdout.log", "regex", "cleanrl")
    assert [p.iter for p in points] == list(range(1, 21))
    assert all(p.samples == 0.0 for p in points) and points[-1].sps == 334


# Real output of each trainer (tests/data/progress/README.md says how each was made): the preset gives the
# trainer's cumulative count as samples, its own iteration where it prints one, and its printed rate as `sps`.
PRESET_CASES = {
    "sb3": ("sb3_ppo_stdout.log", list(range(1, 9)), [256.0 * i for i in range(1, 9)], 583.0, None),
    "stable-baselines3": ("sb3_ppo_stdout.log", list(range(1, 9)), [256.0 * i for i in range(1, 9)], 583.0, None),
    "rsl_rl": ("rsl_rl_5.5.1_stdout.log", list(range(36)), [1536.0 * (i + 1) for i in range(36)], 1270.0, 1.21),
    "legged_gym": ("rsl_rl_2.3.0_stdout.log", list(range(12)), [1536.0 * (i + 1) for i in range(12)], 12196.0, 0.13),
    "rl_games": ("rl_games_1.6.5_stdout.log", [1, 2, 3, 4, 5], [65536.0 * i for i in range(1, 6)], 93623.0, None),
    "mimickit": ("mimickit_stdout.log", list(range(12)), [(i + 1) * MIMICKIT_PER_ITER for i in range(12)], None, None),
}


@pytest.mark.parametrize("preset", list(PRESET_CASES))
def test_presets_on_real_trainer_output(preset: str) -> None:
    name, iters, samples, last_sps, last_step = PRESET_CASES[preset]
    points = read_all(PROGRESS / name, "regex", preset)
    assert [p.iter for p in points] == iters
    assert [p.samples for p in points] == samples
    assert points[-1].sps == last_sps
    assert points[-1].step_time_s == last_step


def test_sheeprl_preset_counts_policy_steps_at_episode_ends() -> None:
    """sheeprl prints `Rank-0: policy_step=N, reward_env_i=R` as each episode ends (two envs may end on one step);
    its Hydra config dump and warnings before them match nothing."""
    points = read_all(PROGRESS / "sheeprl_0.8.4_stdout.log", "regex", "sheeprl")
    assert len(points) == 66 and [p.iter for p in points] == list(range(1, 67))  # 71 lines: 5 repeat a step's count
    samples = [p.samples for p in points]
    assert samples[:3] == [88.0, 112.0, 128.0] and samples[-1] == 4064.0 and samples == sorted(set(samples))
    assert all(p.sps is None for p in points)  # a count, no printed rate


def test_tqdm_preset_counts_the_bar_redrawn_with_carriage_returns() -> None:
    points = read_all(PROGRESS / "tqdm_stderr.log", "regex", "tqdm")
    assert [p.iter for p in points] == list(range(41))  # the second bar starts again at 0: not an advance
    assert [p.samples for p in points] == [float(i) for i in range(41)]
    assert all(p.sps is not None and p.sps > 0 for p in points[1:])


def test_regex_counts_a_line_every_rank_prints_once(tmp_path: Path) -> None:
    path, t0 = tmp_path / "stdout.log", 2_000_000_000.0
    reader = reader_for("regex", path, r"it (?P<iter>\d+) samples (?P<samples>\d+)")
    points = []
    for it in range(1, 5):
        lines = "".join(f"[rank{r}]: it {it} samples {it * 200}\n" for r in (0, 1))
        append(path, lines.encode() + b"unrelated line\n", t0 + it)
        points += reader.read_new()
    assert [(p.t, p.iter, p.samples) for p in points] == [(t0 + i, i, 200.0 * i) for i in range(1, 5)]


def test_a_counter_printed_again_is_the_same_moment_not_a_new_point() -> None:
    """CleanRL's `global_step=N` lines, read with the README's regex (no iter group): it prints one for every env
    whose episode ended in a step, all with that step's count. Each count is one point; its iteration counts points."""
    points = read_all(PROGRESS / "cleanrl_stdout.log", "regex", r"global_step=(?P<samples>\d+)")
    samples = [p.samples for p in points]
    assert len(points) == 278 and samples == sorted(set(samples))  # 286 lines, 8 of them a repeated count
    assert [p.iter for p in points] == list(range(1, 279))


@pytest.mark.parametrize(
    ("kind", "pattern", "expected"),
    [
        ("regex", r"global_step=(?P<samples>\d+)", False),
        ("regex", r"it (?P<iter>\d+) samples (?P<samples>\d+)", True),
        ("regex", "tqdm", False),  # its bar counts env steps, not iterations
        ("regex", "sb3", True),
        ("jsonl", "", True),
        ("mimickit_log", "", True),
    ],
    ids=["samples-only", "iter-group", "tqdm", "sb3", "jsonl", "mimickit"],
)
def test_a_reader_that_only_counts_lines_does_not_number_iterations(kind: str, pattern: str, expected: bool) -> None:
    assert numbered(kind, pattern) is expected


def test_records_that_arrive_together_are_spread_over_the_time_since_the_last(tmp_path: Path) -> None:
    path, reader = tmp_path / "stdout.log", reader_for("regex", tmp_path / "stdout.log", "cleanrl", 100)
    append(path, b"SPS: 10\n", 100.0)
    append(path, b"SPS: 11\nSPS: 12\nSPS: 13\nSPS: 14\n", 100.0)
    assert [p.t for p in reader.read_new()] == [100.0] * 5  # a first read has nothing before it
    append(path, b"SPS: 15\nSPS: 16\n", 104.0)
    assert [(p.t, p.iter) for p in reader.read_new()] == [(102.0, 6), (104.0, 7)]


@pytest.mark.parametrize(
    ("kind", "pattern", "problem"),
    [
        ("csv", "", "unknown progress kind 'csv'"),
        ("regex", r"loss (?P<loss>\d+)", "has groups ['loss']"),
        ("regex", r"iter (?P<iter>\d+", "does not compile"),
        ("regex", "rl_gams", "is no preset (did you mean 'rl_games'?)"),
    ],
    ids=["unknown-kind", "unknown-group", "broken-regex", "misspelt-preset"],
)
def test_bad_progress_settings_say_what_to_use(kind: str, pattern: str, problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        parser_for(kind, pattern)
    assert problem in str(err.value)
    assert "jsonl, mimickit_log, mimickit_stdout, regex" in str(err.value) or "named groups among" in str(err.value)


def test_kinds_by_name_and_alias() -> None:
    assert type(parser_for("mimickit")).__name__ == "MimicKitLogParser"
    assert compile_pattern("cleanrl").search("SPS: 1234")["sps"] == "1234"  # type: ignore[index]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"time": 1771500000.5, "iter": 4, "data_time": 0.002}', Point(1771500000.5, 4, 0.0, None, (), 0.002)),
        ('{"iter": 50, "time": 0.81, "data_time": 0.01}', Point(9.0, 50, 0.0, 0.81, (), 0.01)),
        ('{"iter": 7, "timestamp": 12.0, "samples": 70, "sps": 9.5}', Point(12.0, 7, 70.0, None, (), None, 9.5)),
    ],
    ids=["unix-time", "mmcv-time-is-seconds-per-iter", "timestamp-and-sps"],
)
def test_parse_line_time_keys(line: str, expected: Point) -> None:
    assert parse_line(line, now=9.0) == expected


# ---------------------------------------------------------------- a real proxy run


def test_lines_after_a_pause_keep_the_pause_before_them(tmp_path: Path) -> None:
    """A trainer that updates in silence, then prints a rollout's lines: a read that found nothing new marks the
    pause, and the lines read next are placed after it, not spread back over it (a pause is how an update shows)."""
    path = tmp_path / "stdout.log"
    reader = reader_for("regex", path, r"global_step=(?P<samples>\d+)")
    start = time.time()
    append(path, b"global_step=64\n", start - 10.0)
    (first,) = reader.read_new()
    assert reader.read_new() == []  # the update: nothing new
    quiet = time.time()
    append(path, b"global_step=128\nglobal_step=192\n", quiet + 0.5)
    after = reader.read_new()
    assert first.t == start - 10.0 and [p.iter for p in after] == [2, 3]
    assert all(p.t >= quiet for p in after)  # both after the read that found nothing
