"""Shared fixtures: a real PostgreSQL server (Debian's `postgresql` package) for the tests that share one storage.

The server is private to the test session: `initdb` into a temporary folder, `pg_ctl start` on a free port of
127.0.0.1 with password (scram) authentication, one database per test, `pg_ctl stop` at the end. As root it runs
as the `postgres` user the package creates (PostgreSQL refuses to run as root). Where no server can be started
the tests that need one are skipped with the reason, except under CI (`CI=true`), where that is an error.

On several workers (pytest-xdist: `-n 4 --dist loadfile --no-loadscope-reorder`; four on two cores, since most of a
sweep's time is spent waiting on its trial's processes) each test file runs whole on one worker, so a module fixture
(a sweep several tests read) runs once, and the files that run real sweeps for minutes start first (`HEAVY_FIRST`),
so that no long file is left to run alone at the end.

Each worker starts one warm starter (`ladder.runner.warm.STARTERS.share`) before its first test that runs processes,
and the sweeps its tests start fork their proxy ranks from it: each sweep would otherwise start its own and import torch
once more (about 2.7 CPU-s on this machine). A test about the starter itself starts its own.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ladder.runner import warm
from tests.helpers import memory_cgroups
from tests.nvml_fake import FakeGpu, FakeNvml

# pytest rewrites each test module's asserts as it imports it, and keeps the result in __pycache__ only where bytecode
# may be written: where PYTHONDONTWRITEBYTECODE is set (these machines set it), each worker of every run rewrote all
# the test modules again (its collection 11.0 CPU-s against 5.0 with them kept). The suite keeps its own; what it
# starts (sweeps, trainers) still runs with the variable as set.
sys.dont_write_bytecode = False

PG_USER = "ladder"

# Test files by their cost on 2 cores, the longest first (the rest follow in their usual order): a worker that
# finishes early takes the next file, so the long ones are best started first
HEAVY_FIRST = (
    "test_mimickit_real.py",
    "test_mimickit_ranks.py",
    "test_faults.py",
    "test_recipes.py",
    "test_resume.py",
    "test_sweep_e2e.py",
    "test_exit_codes.py",
    "test_failure_scenarios.py",
    "test_sb3_e2e.py",
    "test_multirun.py",
)


# tests/<kind>/: no process; thousands of seeded simulated walks (no process, seconds each); real processes and
# storage; whole sweeps
KINDS = ("unit", "sim", "integration", "e2e")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test is marked with its folder's kind (`pytest -m unit`), and the long files start first."""
    for item in items:
        kind = next((k for k in KINDS if k in item.path.parent.parts[-1:]), None)
        if kind is not None:
            item.add_marker(getattr(pytest.mark, kind))
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file's tests keep their order


_sharing: list[bool] = []  # tried already in this worker


def pytest_runtest_setup(item: pytest.Item) -> None:
    if _sharing or any(item.get_closest_marker(kind) is not None for kind in ("unit", "sim")):  # no process
        return
    _sharing.append(True)
    if memory_cgroups():  # without a cgroup for the trial no rank is forked from a starter
        warm.STARTERS.share(sys.executable)


def pytest_unconfigure(config: pytest.Config) -> None:
    warm.STARTERS.close()


def pytest_configure(config: pytest.Config) -> None:
    # Tests stop sweeps with Ctrl-C (SIGINT). A shell that starts pytest in the background (`cmd &` in a script,
    # nohup) hands it SIGINT ignored, which every process it starts would inherit: the sweeps would not hear it.
    # A handler is not inherited across exec, so the processes the tests start get SIGINT's default back.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


class NoServer(Exception):
    """Why no PostgreSQL server can be started here."""


@dataclass(frozen=True)
class PgServer:
    base: Path
    port: int
    password: str
    run_as: tuple[str, ...]  # the prefix that runs the server's tools as its owner

    def url(self, database: str) -> str:
        return f"postgresql://{PG_USER}:{self.password}@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        """Stop the server as an administrator would for a restart (`-m fast`: its sessions are ended)."""
        _run([*self.run_as, _tool("pg_ctl"), "-D", str(self.base / "data"), "-m", "fast", "-w", "stop"])

    def start(self) -> None:
        _run(
            [
                *self.run_as,
                _tool("pg_ctl"),
                "-D",
                str(self.base / "data"),
                "-l",
                str(self.base / "server.log"),
                "-w",
                "-t",
                "60",
                "-o",
                _options(self.base, self.port),
                "start",
            ]
        )


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    try:
        server = _start_server()
    except NoServer as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs a PostgreSQL server and none could be started: {exc}", pytrace=False)
        pytest.skip(f"no PostgreSQL server can be started here: {exc}")
    try:
        yield server
    finally:
        _stop_server(server)


@pytest.fixture
def pg_url(pg_server: PgServer, request: pytest.FixtureRequest) -> str:
    """A fresh, empty database on the session's server, as an Optuna storage URL (with its password)."""
    import psycopg

    name = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(pg_server.url("postgres"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return pg_server.url(name)


def _start_server() -> PgServer:
    initdb, pg_ctl = _tool("initdb"), _tool("pg_ctl")
    _need_driver()
    run_as, owner = _run_as()
    base = Path(tempfile.mkdtemp(prefix="ladder-pg-"))
    password = f"pw{secrets.token_hex(12)}"
    (base / "pw").write_text(password + "\n")
    if owner is not None:
        for path in (base, base / "pw"):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    try:
        _run(
            [
                *run_as,
                initdb,
                "-D",
                str(base / "data"),
                "-U",
                PG_USER,
                f"--pwfile={base / 'pw'}",
                "--auth=scram-sha-256",
                "--no-sync",
                "-E",
                "UTF8",
            ]
        )
        port = _free_port()
        options = _options(base, port)
        _run(
            [
                *run_as,
                pg_ctl,
                "-D",
                str(base / "data"),
                "-l",
                str(base / "server.log"),
                "-w",
                "-t",
                "60",
                "-o",
                options,
                "start",
            ]
        )
    except NoServer:
        shutil.rmtree(base, ignore_errors=True)
        raise
    return PgServer(base, port, password, run_as)


def _options(base: Path, port: int) -> str:
    return f"-c listen_addresses=127.0.0.1 -p {port} -k {base} -c fsync=off"


def _stop_server(server: PgServer) -> None:
    with contextlib.suppress(NoServer):
        _run([*server.run_as, _tool("pg_ctl"), "-D", str(server.base / "data"), "-m", "immediate", "-w", "stop"])
    shutil.rmtree(server.base, ignore_errors=True)


def _tool(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), "")
    if not found:
        raise NoServer(f"`{name}` not found: install Debian's postgresql package (apt-get install -y postgresql)")
    return found


def _need_driver() -> None:
    try:
        import psycopg  # noqa: F401 - SQLAlchemy's driver for postgresql:// URLs
    except ImportError:
        raise NoServer("the psycopg driver is not installed: pip install 'psycopg[binary]'") from None


def _run_as() -> tuple[tuple[str, ...], pwd.struct_passwd | None]:
    """PostgreSQL will not run as root: there, its tools run as the package's `postgres` user."""
    if os.geteuid() != 0:
        return (), None
    try:
        owner = pwd.getpwnam("postgres")
    except KeyError:
        raise NoServer("running as root and there is no `postgres` user to run the server as") from None
    runuser = shutil.which("runuser")
    if not runuser:
        raise NoServer("running as root and `runuser` is missing")
    return (runuser, "-u", "postgres", "--"), owner


def _run(argv: list[str]) -> None:
    try:
        subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True, cwd="/")
    except subprocess.CalledProcessError as exc:
        said = (exc.stderr or exc.stdout or "").strip()[-500:]
        tool = next((Path(a).name for a in argv if Path(a).name in ("initdb", "pg_ctl")), argv[0])
        raise NoServer(f"{tool} failed: {said}") from None
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NoServer(f"{exc}") from None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def four_gpus(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    """Four H100s as NVML sees them (the stand-in), all visible: no CUDA_VISIBLE_DEVICES."""
    from ladder.runner import nvml as nvml_sampler

    nvml = FakeNvml(*(FakeGpu() for _ in range(4)))
    monkeypatch.setattr(nvml_sampler, "_nvml", lambda: nvml)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return nvml
