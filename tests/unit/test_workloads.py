"""Planning trials for every workload kind, and running what was planned: a MimicKit-like program and a small
trainer walked by a knob other than num_envs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir

from ladder.core.caseclass import CaseClass, classify_row
from ladder.core.errors import ConfigError, LadderError
from ladder.core.spec import Launcher, ProgressKind, TrialSpec
from ladder.runner.machine import emulated_card_gb
from ladder.settings.argv import known_cases
from ladder.settings.config import Profile, Settings, WorkloadConf, register, settings_from
from ladder.storage.reuse import fingerprint
from ladder.workloads.builtin import Placement
from ladder.workloads.command import CommandConf, command_conf, named_files
from ladder.workloads.mimickit import MimicKitConf, missing_files
from ladder.workloads.planner import Kind, Workload, build, distinct_profiles, parse_kind, plan, resolve
from ladder.workloads.progress import MimicKitLogParser, MimicKitStdoutParser, Parser, parser_for
from tests.helpers import DATA, REPO

FAKE_MIMICKIT = str(DATA / "fake_mimickit")  # holds mimickit/run.py

ROOT = REPO
CONF = str(ROOT / "conf")
NCCL = {"NCCL_P2P_DISABLE": "1"}
TWO_GPUS = Placement(device="cuda", nproc=2, port=29517, python="python")
register()


def settings(case: str, *overrides: str) -> Settings:
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"case={case}", "profile=[default,hiutil,hiutil40]", *overrides])
    return settings_from(cfg, known_cases())


def profile(s: Settings, name: str) -> Profile:
    return next(p for p in s.profiles if p.name == name)


def parser(spec: TrialSpec) -> Parser:
    return parser_for(spec.progress_kind, spec.progress_regex)


def mimickit(root: str = "/opt/MimicKit", **kw: object) -> Workload:
    return Workload(Kind.MIMICKIT, WorkloadConf(), mimickit=MimicKitConf(root=root, **kw))  # type: ignore[arg-type]


# ---- MimicKit: the planned argv -------------------------------------------------------------------------------


def test_amp_pi_plus_mimickit_argv() -> None:
    s, td = settings("amp_pi_plus"), "/out/trials/amp_pi_plus/default_e38_probe_1"
    spec = plan(mimickit(), s.case, profile(s, "default"), 38, TWO_GPUS, td, 900.0, NCCL)
    assert spec.argv == (
        "python",
        "mimickit/run.py",
        "--arg_file",
        "args/amp_pi_plus_args.txt",
        "--mode",
        "train",
        "--num_envs",
        "38",
        "--devices",
        "cuda:0",
        "cuda:1",
        "--visualize",
        "false",
        "--logger",
        "txt",
        "--out_dir",
        td,
        "--max_samples",
        "4864000",  # 2000 iterations x 32 steps x 38 envs x 2 ranks
        "--agent_config",
        f"{td}/agent.yaml",
        "--master_port",
        "29517",
    )
    assert spec.cwd == "/opt/MimicKit" and spec.launcher is Launcher.DIRECT
    assert (spec.progress_kind, spec.progress_file) == (ProgressKind.MIMICKIT_STDOUT, "stdout.log")
    assert spec.env == {"NCCL_P2P_DISABLE": "1", "PYTHONUNBUFFERED": "1"}
    assert yaml.safe_load(spec.files["agent.yaml"]) == s.case.agent  # default: the agent as shipped


def test_hiutil_deepmimic_argv_with_newton_and_its_own_python() -> None:
    s, td = settings("deepmimic_humanoid_ppo"), "/out/trials/deepmimic_humanoid_ppo/hiutil_e1024_probe_1"
    workload = mimickit(python="/envs/mk/bin/python", engine_config="data/engines/newton_engine.yaml")
    spec = plan(workload, s.case, profile(s, "hiutil"), 1024, TWO_GPUS, td, 900.0, {})
    assert spec.argv == (
        "/envs/mk/bin/python",
        "mimickit/run.py",
        "--arg_file",
        "args/deepmimic_humanoid_ppo_args.txt",
        "--mode",
        "train",
        "--num_envs",
        "1024",
        "--devices",
        "cuda:0",
        "cuda:1",
        "--visualize",
        "false",
        "--logger",
        "txt",
        "--out_dir",
        td,
        "--max_samples",
        "131072000",
        "--agent_config",
        f"{td}/agent.yaml",
        "--master_port",
        "29517",
        "--engine_config",
        "data/engines/newton_engine.yaml",
    )
    agent = yaml.safe_load(spec.files["agent.yaml"])
    assert agent["model"]["actor_net"] == agent["model"]["critic_net"] == "fc_3layers_1024units"
    assert "disc_net" not in agent["model"] and (agent["actor_epochs"], agent["actor_batch_size"]) == (20, 2)
    assert spec.info["profile_skipped"] == "model.disc_net"


def test_mimickit_devices_follow_the_placement() -> None:
    s = settings("amp_pi_plus")
    place = Placement("cuda", 2, 1, "python", gpus=(2, 3))
    argv = plan(mimickit(), s.case, s.profiles[0], 40, place, "/t", 1.0, {}).argv
    assert argv[argv.index("--devices") + 1 : argv.index("--visualize")] == ("cuda:2", "cuda:3")


def test_mimickit_walks_an_agent_key() -> None:
    s = settings("amp_humanoid")
    spec = plan(
        replace(mimickit(num_envs=2048), knob="actor_batch_size"),
        s.case,
        profile(s, "hiutil"),
        8,
        TWO_GPUS,
        "/t",
        1.0,
        {},
    )
    assert spec.argv[spec.argv.index("--num_envs") + 1] == "2048"
    assert yaml.safe_load(spec.files["agent.yaml"])["actor_batch_size"] == 8  # the knob wins over the profile


@pytest.mark.parametrize(
    ("workload", "trial_dir", "message"),
    [
        (replace(mimickit(), knob="warp_speed"), "/t", "cannot walk knob 'warp_speed'"),
        (replace(mimickit(), knob="actor_epochs"), "/t", "no num_envs is fixed"),
        (mimickit(), "relative/trial", "is relative"),
        (mimickit(root=""), "/t", "no MimicKit folder"),
    ],
    ids=["unknown-knob", "knob-without-num-envs", "relative-trial-dir", "no-root"],
)
def test_mimickit_refuses_what_cannot_run(workload: Workload, trial_dir: str, message: str) -> None:
    s = settings("amp_pi_plus")
    with pytest.raises(LadderError, match=message):
        plan(workload, s.case, s.profiles[0], 40, TWO_GPUS, trial_dir, 1.0, {})


def test_missing_files_names_them(tmp_path: Path) -> None:
    s = settings("amp_pi_plus")
    assert missing_files(MimicKitConf(root=str(tmp_path)), s.case) == [
        str(tmp_path / "mimickit/run.py"),
        str(tmp_path / "args/amp_pi_plus_args.txt"),
    ]


# ---- MimicKit: the env-config patch ------------------------------------------------------------------------------

SWAY = "data/motions/synthetic/humanoid_sway.pkl"


def mimickit_folder(tmp_path: Path) -> Path:
    """A MimicKit-shaped folder: the deepmimic humanoid's args file (a comment, the env config named once) and env."""
    (tmp_path / "args").mkdir()
    (tmp_path / "data" / "envs").mkdir(parents=True)
    (tmp_path / "args" / "deepmimic_humanoid_ppo_args.txt").write_text(
        "--num_envs 4096\n\n# --env_config data/envs/commented_out.yaml\n--engine_config data/engines/isaac.yaml\n"
        "--env_config data/envs/deepmimic_humanoid_env.yaml\n--env_config data/envs/second_is_ignored.yaml\n"
    )
    (tmp_path / "data" / "envs" / "deepmimic_humanoid_env.yaml").write_text(
        'env_name: "deepmimic"\nepisode_length: 10.0 # seconds\nmotion_file: "data/motions/humanoid/spinkick.pkl"\n'
        "reward: {pose_w: 0.5, vel_w: 0.1}\n"
    )
    return tmp_path


def test_env_patch_hands_mimickit_a_patched_copy_in_the_trial_folder(tmp_path: Path) -> None:
    root, s, td = mimickit_folder(tmp_path), settings("deepmimic_humanoid_ppo"), "/out/t/default_e4_probe_1"
    shipped = (root / "data/envs/deepmimic_humanoid_env.yaml").read_text()
    patch = {"motion_file": SWAY, "episode_length": 2.0, "reward": {"vel_w": 0.3}, "rand_reset": False}
    spec = plan(mimickit(str(root), env_patch=patch), s.case, profile(s, "default"), 4, TWO_GPUS, td, 1.0, {})
    assert spec.argv[-2:] == ("--env_config", f"{td}/env.yaml")  # the command line wins over the args file's
    assert yaml.safe_load(spec.files["env.yaml"]) == {
        "env_name": "deepmimic",
        "episode_length": 2.0,
        "motion_file": SWAY,
        "reward": {"pose_w": 0.5, "vel_w": 0.3},
        "rand_reset": False,
    }
    assert spec.info["env_added"] == "rand_reset" and "motion_file=" + SWAY in spec.info["env_patch"]
    assert (root / "data/envs/deepmimic_humanoid_env.yaml").read_text() == shipped  # the checkout is not written


def test_without_env_patch_the_args_files_env_config_runs(tmp_path: Path) -> None:
    s = settings("deepmimic_humanoid_ppo")
    spec = plan(mimickit(str(tmp_path)), s.case, profile(s, "default"), 4, TWO_GPUS, "/t", 1.0, {})
    assert "--env_config" not in spec.argv and set(spec.files) == {"agent.yaml"}  # nothing read: no folder needed


def test_the_env_patch_is_part_of_the_reuse_identity(tmp_path: Path) -> None:
    root, s = mimickit_folder(tmp_path), settings("deepmimic_humanoid_ppo")

    def sha(patch: dict) -> str:
        return fingerprint(
            plan(mimickit(str(root), env_patch=patch), s.case, s.profiles[0], 4, TWO_GPUS, "/t", 1.0, {})
        )

    assert sha({"motion_file": SWAY}) == sha({"motion_file": SWAY})
    assert len({sha({}), sha({"motion_file": SWAY}), sha({"motion_file": SWAY, "episode_length": 2.0})}) == 3
    before = sha({"motion_file": SWAY})
    (root / "data/envs/deepmimic_humanoid_env.yaml").write_text('env_name: "deepmimic"\nepisode_length: 5.0\n')
    assert sha({"motion_file": SWAY}) != before  # the env config the patch applies to changed: not the same trial


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda root: (root / "args/deepmimic_humanoid_ppo_args.txt").unlink(), "args file .* is not there"),
        (
            lambda root: (root / "args/deepmimic_humanoid_ppo_args.txt").write_text("--num_envs 4\n"),
            "names no --env_config",
        ),
        (lambda root: (root / "data/envs/deepmimic_humanoid_env.yaml").unlink(), "cannot be read"),
        (lambda root: (root / "data/envs/deepmimic_humanoid_env.yaml").write_text("- a list\n"), "not a mapping"),
    ],
    ids=["no-args-file", "no-env-config-named", "env-config-missing", "env-config-not-a-mapping"],
)
def test_env_patch_names_what_it_cannot_patch(tmp_path: Path, setup: object, message: str) -> None:
    root, s = mimickit_folder(tmp_path), settings("deepmimic_humanoid_ppo")
    setup(root)  # type: ignore[operator]
    with pytest.raises(ConfigError, match=message):
        plan(mimickit(str(root), env_patch={"episode_length": 1.0}), s.case, s.profiles[0], 4, TWO_GPUS, "/t", 1.0, {})


def test_env_patch_from_hydra_overrides_and_only_for_mimickit() -> None:
    s = settings(
        "deepmimic_humanoid_ppo", f"+workload.env_patch.motion_file={SWAY}", "+workload.env_patch.episode_length=2"
    )
    workload, _ = build(s.workload, s.knob, {"MIMICKIT_ROOT": FAKE_MIMICKIT})
    assert workload.mimickit is not None and workload.mimickit.env_patch == {"motion_file": SWAY, "episode_length": 2}
    with pytest.raises(ConfigError, match="env_patch patches a MimicKit env config, but the workload is proxy"):
        build(s.workload, s.knob, {})


def test_an_emulated_card_is_shown_and_recorded_for_the_proxy_on_cpu_and_for_any_trainer_on_a_gpu() -> None:
    proxy = settings("deepmimic_humanoid_ppo", "workload.kind=proxy", "workload.emulate_gpu_mem_gb=0.6")
    real = settings("deepmimic_humanoid_ppo", "workload.mimickit_root=/opt/MimicKit", "workload.emulate_gpu_mem_gb=0.6")
    assert emulated_card_gb(proxy, "cpu") == 0.6 and emulated_card_gb(real, "cpu") is None
    assert emulated_card_gb(proxy, "cuda") == 0.6 and emulated_card_gb(real, "cuda") == 0.6  # MimicKit: a ballast


def test_a_cpu_run_gets_no_gpu_class() -> None:
    cpu = {"status": "ok", "min_avg_util": "98.0", "max_mem0": "900", "gpu_mem_total": "", "gpu_name": "cpu"}
    assert classify_row(cpu) == (CaseClass.UNCLASSIFIED, classify_row(cpu)[1])
    assert classify_row(cpu)[1].startswith("no class on CPU")
    assert classify_row(cpu | {"cap_used_mb": "600", "cap_mb": "614"})[0] is CaseClass.VRAM_BOUND  # emulated card


# ---- auto, proxy --------------------------------------------------------------------------------------------------


def test_auto_picks_mimickit_when_a_folder_is_configured() -> None:
    assert resolve(Kind.AUTO, "/opt/MimicKit", {}).kind is Kind.MIMICKIT
    assert resolve(Kind.AUTO, "", {"MIMICKIT_ROOT": "/srv/mk"}).mimickit_root == "/srv/mk"
    assert resolve(Kind.AUTO, "/opt/MimicKit", {"MIMICKIT_ROOT": "/srv/mk"}).mimickit_root == "/opt/MimicKit"


def test_auto_without_mimickit_runs_the_proxy_and_says_how_to_switch() -> None:
    got = resolve(Kind.AUTO, "", {})
    assert got.kind is Kind.PROXY
    assert "workload.mimickit_root=/path/to/MimicKit" in got.note and "MIMICKIT_ROOT" in got.note


def test_build_from_plain_settings() -> None:
    proxy, note = build(WorkloadConf(kind="proxy"), "num_envs", {})
    assert proxy.kind is Kind.PROXY and proxy.mimickit is None and note == "workload proxy"
    mk, note = build(WorkloadConf(progress="mimickit_log"), "num_envs", {"MIMICKIT_ROOT": FAKE_MIMICKIT})
    assert mk.mimickit == MimicKitConf(root=FAKE_MIMICKIT, progress=ProgressKind.MIMICKIT_LOG)
    assert FAKE_MIMICKIT in note
    inp = WorkloadConf(kind="command", command=["t", "{k}"], launcher="torchrun", progress_regex="")
    cmd, _ = build(inp, "k", {})
    assert cmd.command is not None and cmd.command.launcher is Launcher.TORCHRUN and cmd.knob == "k"
    assert "(?P<iter>" in cmd.command.progress_regex  # "" = the default pattern


@pytest.mark.parametrize(
    ("root", "message"),
    [("/nonexistent/MimicKit", "'/nonexistent/MimicKit' is not a folder"), (str(REPO), "holds no mimickit/run.py")],
    ids=["missing", "not-a-checkout"],
)
def test_a_mimickit_folder_that_is_not_one_is_refused_when_the_workload_is_built(root: str, message: str) -> None:
    """Before the sweep writes anything (its first trial ended in a launch traceback, exit 1)."""
    with pytest.raises(ConfigError, match=message) as err:
        build(WorkloadConf(mimickit_root=root), "num_envs", {})
    assert "workload.mimickit_root=/path/to/MimicKit" in str(err.value)


@pytest.mark.parametrize(
    ("inp", "message"),
    [
        (WorkloadConf(kind="slurm"), "unknown workload.kind 'slurm'.*auto, proxy, mimickit, command"),
        (WorkloadConf(kind="command", launcher="mpirun"), "unknown workload.launcher 'mpirun'.*torchrun, direct"),
        (WorkloadConf(kind="command", progress="mimickit_log"), "workload.progress 'mimickit_log'.*regex, jsonl"),
        (WorkloadConf(kind="mimickit", mimickit_root="/m", progress="regex"), "mimickit_stdout, mimickit_log"),
    ],
    ids=["kind", "launcher", "command-progress", "mimickit-progress"],
)
def test_build_names_bad_choices(inp: WorkloadConf, message: str) -> None:
    with pytest.raises(ConfigError, match=f"(?s){message}"):
        build(inp, "num_envs", {})


def test_bad_kinds_are_named() -> None:
    with pytest.raises(ConfigError, match="auto, proxy, mimickit, command"):
        parse_kind("slurm")
    with pytest.raises(ConfigError, match="no MimicKit folder"):
        resolve(Kind.MIMICKIT, "", {})


def test_proxy_plan_keeps_amp_pi_plus_and_stands_in_for_vault_with_ppo() -> None:
    place = Placement("cpu", 2, 29500, "python")
    work = Workload(Kind.PROXY, WorkloadConf())
    amp = plan(work, (s := settings("amp_pi_plus")).case, s.profiles[0], 64, place, "/t", 30.0, {})
    vault = plan(work, (v := settings("vault_g1")).case, v.profiles[0], 64, place, "/t", 30.0, {})
    assert amp.argv[amp.argv.index("--method") + 1] == "amp" and amp.launcher is Launcher.DIRECT  # ladder.runner.ranks
    assert vault.argv[vault.argv.index("--method") + 1] == "ppo"  # vault runs a PPO agent: no discriminator
    with pytest.raises(ConfigError, match="num_envs only"):
        plan(replace(work, knob="update_interval"), s.case, s.profiles[0], 10, place, "/t", 30.0, {})


# ---- command ------------------------------------------------------------------------------------------------------


def command(argv: tuple[str, ...], knob: str = "num_envs", **kw: object) -> Workload:
    return Workload(Kind.COMMAND, WorkloadConf(), knob=knob, command=CommandConf(argv=argv, **kw))  # type: ignore[arg-type]


def test_hydra_overrides_of_seed_004() -> None:
    s = settings("amp_pi_plus")
    template = (
        "python",
        "-m",
        "worker.train",
        "worker.multitask.num_envs={num_envs}",
        "hydra.run.dir={trial_dir}",
        "trainer.devices={nproc}",
        "+agent={agent_config}",
        "literal={{braces}}",
    )
    spec = plan(command(template), s.case, profile(s, "hiutil"), 16, TWO_GPUS, "/o/t1", 1.0, NCCL)
    assert spec.argv == (
        "python",
        "-m",
        "worker.train",
        "worker.multitask.num_envs=16",
        "hydra.run.dir=/o/t1",
        "trainer.devices=2",
        "+agent=/o/t1/agent.yaml",
        "literal={braces}",
    )
    assert spec.launcher is Launcher.DIRECT and spec.progress_kind is ProgressKind.REGEX
    assert spec.progress_file == "stdout.log" and "(?P<iter>" in spec.progress_regex
    assert yaml.safe_load(spec.files["agent.yaml"])["actor_epochs"] == 20


def test_command_under_torchrun() -> None:
    s = settings("amp_pi_plus")
    work = command(
        ("rl_trainer/main_ddp.py", "--update_interval", "{update_interval}"),
        knob="update_interval",
        launcher=Launcher.TORCHRUN,
    )
    spec = plan(work, s.case, s.profiles[0], 10, TWO_GPUS, "/o/t", 1.0, {})
    assert spec.argv[:3] == ("python", "-m", "torch.distributed.run")
    assert spec.argv[-3:] == ("rl_trainer/main_ddp.py", "--update_interval", "10")
    assert spec.info["knob"] == "update_interval" and "--no-python" not in spec.argv


def test_a_command_under_torchrun_written_as_users_run_it_alone_runs_as_written() -> None:
    """`python train.py ...` (an interpreter, or any program, first): torchrun runs it with `--no-python`, each
    rank with the user's own interpreter; one rank started directly gets no interpreter of ladder's before it."""
    s = settings("amp_pi_plus")
    work = command(("/venv/bin/python", "train.py", "--num-envs", "{num_envs}"), launcher=Launcher.TORCHRUN)
    spec = plan(work, s.case, s.profiles[0], 16, TWO_GPUS, "/o/t", 1.0, {})
    at = spec.argv.index("--no-python")
    assert spec.argv[:3] == ("python", "-m", "torch.distributed.run") and spec.launcher is Launcher.TORCHRUN
    assert spec.argv[at + 1 :] == ("/venv/bin/python", "train.py", "--num-envs", "16")
    one = plan(work, s.case, s.profiles[0], 16, replace(TWO_GPUS, nproc=1), "/o/t", 1.0, {})
    assert one.argv == ("/venv/bin/python", "train.py", "--num-envs", "16") and one.launcher is Launcher.DIRECT
    assert one.env["WORLD_SIZE"] == "1"
    script = plan(
        command(("train.py", "{num_envs}"), launcher=Launcher.TORCHRUN),
        s.case,
        s.profiles[0],
        16,
        replace(TWO_GPUS, nproc=1),
        "/o/t",
        1.0,
        {},
    )
    assert script.argv == ("python", "train.py", "16")


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        (command(("t", "n={num_envs}", "{gpus}")), r"unknown placeholder\(s\) \['gpus'\]"),
        (command(("t", "n=16"), knob="update_interval"), r"never uses \{update_interval\}"),
        (command(("t", "{num_envs}"), progress_regex=r"step (\d+)"), "named group"),
        (command(("t", "{num_envs}"), progress_regex=r"(?P<iter>\d+"), "does not compile"),
        (command(("t", "{num_envs")), "malformed"),
        (command(()), "no argv template"),
    ],
    ids=["unknown-placeholder", "knob-unused", "regex-without-iter", "regex-broken", "brace", "empty"],
)
def test_command_templates_that_cannot_run(workload: Workload, message: str) -> None:
    s = settings("amp_pi_plus")
    with pytest.raises(ConfigError, match=message):
        plan(workload, s.case, s.profiles[0], 8, TWO_GPUS, "/t", 1.0, {})


# ---- MimicKit: running what was planned -------------------------------------------------------------------------


# ---- parsers ------------------------------------------------------------------------------------------------------


def table(it: int, samples: int) -> bytes:
    return (
        f"-------\n|  Iteration | {it:>15} |\n|  Wall_Time | {0.5 * it:>15.3g} |\n"
        f"|    Samples | {samples:>15} |\n-------\n"
    ).encode()


def test_stdout_table_split_across_reads_gets_times_from_the_reads() -> None:
    stdout, data = MimicKitStdoutParser(), table(0, 100) + table(1, 200) + table(2, 300) + table(3, 400)
    first = stdout.feed(data[:20], now=10.0) + stdout.feed(data[20:110], now=11.0)
    assert [(p.iter, p.t) for p in first] == [(0, 11.0)]
    rest = stdout.feed(data[110:], now=14.0)
    assert [(p.iter, p.samples, p.t) for p in rest] == [(1, 200.0, 12.0), (2, 300.0, 13.0), (3, 400.0, 14.0)]


def test_regex_counts_a_line_every_rank_prints_once() -> None:
    s = settings("amp_pi_plus")
    spec = plan(command(("t", "{num_envs}")), s.case, s.profiles[0], 4, TWO_GPUS, "/t", 1.0, {})
    text = b"[default0]:iter 1 samples 10\n[default1]:iter 1 samples 10\n[default0]:iter 2 samples 20\r\n[defa"
    regex = parser(spec)
    assert [p.iter for p in regex.feed(text, now=5.0)] == [1, 2]
    assert [p.iter for p in regex.feed(b"ult1]:iter 2 samples 20\n[default0]:iter 3 samples 30\n", 6.0)] == [3]


def test_log_txt_rows_end_with_carriage_returns() -> None:
    head = "".join(f"{k:<25}" for k in ("Iteration", "Wall_Time", "Samples", "Train_Return"))
    hours = (("0", "0.0005", "1024", "0.1"), ("100", "0.0145", "103424", "0.4"))  # Wall_Time is in hours
    rows = ["".join(f"{v:<25}" for v in r) for r in hours]
    points = MimicKitLogParser().feed(("\r".join([head, *rows]) + "\r").encode(), now=99.0)
    assert [(p.iter, p.samples) for p in points] == [(0, 1024.0), (100, 103424.0)]
    assert points[1].step_time_s == pytest.approx(0.504)  # 0.014 h over 100 iterations


# ---- dry run ------------------------------------------------------------------------------------------------------


ALL = ["default", "hiutil", "hiutil40"]


@pytest.mark.parametrize(
    ("overrides", "runs"),
    [
        (('workload.cmd="python t.py {num_envs}"',), ["default"]),
        (('workload.cmd="python t.py {num_envs} --profile {profile}"',), ALL),
        (('workload.cmd="python t.py {num_envs} --cfg {agent_config}"',), ALL),
        (('workload.cmd="python t.py {num_envs}"', "++workload.env.RUN='{variant}'"), ALL),
        ((), ALL),  # no template yet: a resume takes it, and the profiles, from the record
    ],
    ids=["reads none", "profile", "agent_config", "variant in env", "no template"],
)
def test_ones_own_trainer_runs_one_profile_where_its_command_reads_none(
    overrides: tuple[str, ...], runs: list[str]
) -> None:
    given = settings("amp_pi_plus", "workload.kind=command", *overrides)
    assert [p.name for p in given.profiles] == ALL  # the helper gives three
    kept, note = distinct_profiles(given)
    assert [p.name for p in kept.profiles] == runs
    assert bool(note) == (runs == ["default"]) and (
        not note or "hiutil, hiutil40 would run the same command as default" in note
    )


def test_the_files_a_command_names_are_its_script_and_configs_once_each(tmp_path: Path) -> None:
    for name in ("train.py", "cfg.yaml"):
        (tmp_path / name).write_text("")
    argv = ["python", "train.py", "--config=cfg.yaml", "--num-envs", "{num_envs}", "cfg.yaml", "out/{trial_dir}"]
    conf = command_conf(argv, Launcher.DIRECT, ProgressKind.REGEX, "", "", "", {}, {}, str(tmp_path))
    assert named_files(conf) == (str(tmp_path / "train.py"), str(tmp_path / "cfg.yaml"))
    (tmp_path / "more.yaml").write_text("")  # a Hydra-style override naming a file by its absolute path
    hydra = command_conf(
        [*argv, f"agent.cfg={tmp_path / 'more.yaml'}"],
        Launcher.DIRECT,
        ProgressKind.REGEX,
        "",
        "",
        "",
        {},
        {},
        str(tmp_path),
    )
    assert named_files(hydra)[-1] == str(tmp_path / "more.yaml")
    bare = command_conf(["python", "-m", "pkg.train"], Launcher.DIRECT, ProgressKind.REGEX, "", "", "", {}, {}, "")
    assert named_files(bare) == ()


def _interpreter(folder: Path, venv: bool) -> Path:
    """A stand-in interpreter file at folder/bin/python, in a virtual environment (pyvenv.cfg beside bin) or not."""
    (folder / "bin").mkdir(parents=True)
    if venv:
        (folder / "pyvenv.cfg").write_text("home = /usr/bin\n")
    exe = folder / "bin" / "python"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    return exe


def test_a_trainer_from_another_venv_records_its_own_venv_not_ladders(tmp_path: Path) -> None:
    ladders = {"VIRTUAL_ENV": "/opt/ladder-venv", "PATH": "/usr/bin"}
    other = _interpreter(tmp_path / "other", venv=True)
    plain = _interpreter(tmp_path / "plain", venv=False)

    def recorded(argv: list[str], environ: dict[str, str]) -> str | None:
        conf = command_conf(argv, Launcher.DIRECT, ProgressKind.REGEX, "", "", "", {}, environ, str(tmp_path))
        return conf.inherited.get("VIRTUAL_ENV")

    assert recorded([str(other), "train.py"], ladders) == str(tmp_path / "other")
    assert recorded([str(plain), "train.py"], ladders) is None  # an interpreter outside any venv: none recorded
    assert recorded(["python", "train.py"], {**ladders, "PATH": str(tmp_path / "other" / "bin")}) == str(
        tmp_path / "other"
    )
    assert recorded(["./train.sh"], ladders) == "/opt/ladder-venv"  # not a Python: what ladder started with
