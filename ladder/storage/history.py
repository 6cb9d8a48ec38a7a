"""Every stored trial that measured memory, as the memory model reads it (`ladder.core.memory`): grouped by case,
profile, trainer code and machine (`Group`), each trial an `Observation` in the units of the cap it ran under.

Memory as the cap sees it: the emulated card's use where the built-in proxy caps itself (`cap_used_mb`, per rank
where its progress lines say), the memory cgroup's own peak under `workload.host_mem_limit_gb` (never a sum of
per-process RSS), and on a GPU NVML's per-device peak, net of the ballast. A fit is a point; a memory failure of
high confidence a lower bound. Copies of trials (reused or carried) count once, as their originals.

`observations`, `groups`, `caps_of` and `models` are pure; `stored` and `trial_notes` read storages and trial folders.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from optuna.storages import BaseStorage

from ladder.core import figkeys
from ladder.core.memory import similar
from ladder.core.memory.model import PREALLOCATE, Model, Observation, fit
from ladder.core.paths import CMD, ENV, PROGRESS, STDOUT, SweepPaths
from ladder.core.pick import weak
from ladder.core.records import Phase, Reason, Status, TrialRecord
from ladder.failures.patterns import is_memory
from ladder.storage import reuse, studies, sweeps

log = logging.getLogger(__name__)

FITS = frozenset({Status.OK, Status.UNMEASURED, Status.DIVERGED})  # it ran: its peak stands (as the walk's points)
# the machine and trainer code a model holds for (the card, and a cgroup's cap, are what it predicts across)
MACHINE_KEYS = tuple(k for k in reuse.SHAPE_KEYS if k != "host_mem_limit_gb") + (
    "workload",
    "nproc",
    "width_factor",
    "launcher",
    "knob",
)
SNIFF_BYTES = 64 * 1024  # of a trial's command and log, what is read to tell a JAX trainer


class Cap:
    """The kinds of cap a trial's memory is read against (models of different kinds never mix)."""

    EMULATED = "emulated card"
    CGROUP = "memory cgroup"
    GPU = "GPU memory"


@dataclass(frozen=True)
class Group:
    """What one model holds for: a case and profile, the kind of cap, and the machine and trainer code."""

    case: str
    profile: str
    cap: str
    machine: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Notes:
    """What a trial's folder adds: each rank's peak under the emulated card, and whether it is a JAX trainer
    that preallocates (its environment without `XLA_PYTHON_CLIENT_PREALLOCATE=false`)."""

    rank_peaks_mb: tuple[float, ...] = ()
    jax_preallocates: bool = False


NotesOf = Callable[[TrialRecord], Notes]  # what a trial's folder adds to its record (`trial_notes`)


# ---------------------------------------------------------------- pure


def groups(record: TrialRecord) -> list[Group]:
    """The models a trial belongs to: one per cap its memory was read against (none where there was none)."""
    keys = MACHINE_KEYS + (("host",) if record.info.get("device", "cpu") == "cpu" else ())
    machine = tuple((k, record.info.get(k, "")) for k in keys)
    return [Group(record.case, record.profile, kind, machine) for kind, _, _ in _caps(record)]


def caps_of(record: TrialRecord) -> list[tuple[Group, float]]:
    """The models a trial feeds and the size (MiB) of the cap it runs under in each: for a trial about to run,
    the cards its prediction is asked for (`ladder.sweep.prior`)."""
    return [(group, cap_mb) for group, (_, cap_mb, _) in zip(groups(record), _caps(record), strict=True)]


def observations(record: TrialRecord, notes: Notes = Notes()) -> list[tuple[Group, Observation]]:
    """The trial as the models read it: a fit, with each device's peak, under every cap it ran under; a memory
    failure a bound under the cap its evidence names (a cgroup's OOM kill, else the emulated card, else the one
    cap). Nothing for anything else: an error, a timeout, a weak verdict, a copy, a trial under no cap, a
    side-by-side job of the placement phase (one device of the trial's N: a shape of trial the sweep's own models,
    and cards.tsv's rows, do not answer for)."""
    if record.info.get("reused_from") or record.phase is Phase.PLACEMENT:
        return []
    label, found = reuse.origin(record), list(zip(groups(record), _caps(record), strict=True))
    if record.status in FITS:
        out = []
        for group, (kind, cap_mb, peaks) in found:
            peaks = notes.rank_peaks_mb if kind == Cap.EMULATED and notes.rank_peaks_mb else peaks
            out += [(group, Observation(record.num_envs, cap_mb, peaks, True, label))] if peaks else []
        return out
    if record.status is not Status.OOM_OR_NCCL or not is_memory(record.reason) or weak(record) or not found:
        return []
    named = _named(record)
    group, (_, cap_mb, _) = next((f for f in found if f[1][0] == named), found[0])
    return [(group, Observation(record.num_envs, cap_mb, (), False, label))]


def _named(record: TrialRecord) -> str:
    """The cap a memory failure names: a cgroup's OOM kill, a CUDA out-of-memory (the GPU), else the emulated card."""
    if "memory cgroup" in record.evidence:
        return Cap.CGROUP
    return Cap.GPU if record.reason is Reason.CUDA_OOM else Cap.EMULATED


def _caps(record: TrialRecord) -> list[tuple[str, float, tuple[float, ...]]]:
    """Each cap a trial ran under: its kind, its size (MiB) and each device's peak against it (empty where none
    was read): the proxy's own emulated card, the memory cgroup, the GPU (where the proxy's own cap is not the
    one that counts)."""
    f, info = record.figures, record.info
    found: list[tuple[str, float, tuple[float, ...]]] = []
    card = reuse.card_gb(info)
    if f.get("cap_mb") or (card and info.get("workload") == "proxy" and info.get("source") != "nvml"):
        cap = f.get("cap_mb") or round((card or 0.0) * 1024)
        found.append((Cap.EMULATED, cap, (f["cap_used_mb"],) if "cap_used_mb" in f else ()))
    if limit := f.get("cgroup_limit_mb") or _gb_mb(info.get("host_mem_limit_gb", "")):
        found.append((Cap.CGROUP, limit, (f["cgroup_peak_mb"],) if "cgroup_peak_mb" in f else ()))
    total = _gb_mb(info.get("gpu_mem_total", ""), 1.0)
    if info.get("source") == "nvml" and total and not any(kind == Cap.EMULATED for kind, _, _ in found):
        found.append((Cap.GPU, total, tuple(figkeys.values(f, figkeys.MAX_MEM))))
    return found


def _gb_mb(text: str, scale: float = 1024.0) -> float:
    try:
        return float(text) * scale if text else 0.0
    except ValueError:
        return 0.0


def models(records: Iterable[TrialRecord], notes: NotesOf | None = None) -> dict[Group, Model]:
    """One model per group of the trials that measured memory (`notes`: what each trial's folder adds)."""
    found: dict[Group, list[Observation]] = {}
    jax: dict[Group, bool] = {}
    for record in records:
        extra = notes(record) if notes else Notes()
        for group, obs in observations(record, extra):
            found.setdefault(group, []).append(obs)
            jax[group] = jax.get(group, False) or extra.jax_preallocates
    fitted = {g: fit(obs, _jax_advice() if jax[g] else "") for g, obs in found.items()}
    return {g: _with_siblings(g, m, fitted) for g, m in fitted.items()}


def _with_siblings(group: Group, model: Model, fitted: Mapping[Group, Model]) -> Model:
    """A profile's model of one point, with the line of another profile of its case, cap and machine where that
    line predicts the point (`similar.from_sibling`); else as fitted."""
    siblings = {
        g.profile: m
        for g, m in fitted.items()
        if g != group and (g.case, g.cap, g.machine) == (group.case, group.cap, group.machine)
    }
    return similar.from_sibling(model, siblings) or model if siblings else model


def _jax_advice() -> str:
    return f"JAX preallocates 75% of the GPU: set {PREALLOCATE}=false in the trial's environment (workload.env)"


def jax_preallocates(cmd: str, env: Mapping[str, str], log_head: str) -> bool:
    """A JAX trainer (its command or its log names jax) whose environment leaves preallocation on."""
    named = "jax" in cmd.lower() or "jax" in log_head.lower()
    return named and env.get(PREALLOCATE, "").strip().lower() not in ("false", "0")


def rank_peaks(progress_lines: Sequence[str]) -> tuple[float, ...]:
    """Each rank's largest `cap_used_mb` over the proxy's progress lines (empty where none says)."""
    peaks: list[float] = []
    for line in progress_lines:
        try:
            ranks = json.loads(line).get("cap_used_mb")
        except (ValueError, AttributeError):
            continue
        if isinstance(ranks, list) and ranks:
            peaks = [max(p, float(u)) for p, u in zip(peaks or [0.0] * len(ranks), ranks, strict=False)]
    return tuple(peaks)


# ---------------------------------------------------------------- effects


def stored(storage: BaseStorage | None, output_root: Path | None) -> list[TrialRecord]:
    """Every finished trial in `storage` (a shared database holds many sweeps) and in the sibling sweep folders
    under `output_root` that keep their own journal; each original once."""
    found = studies.sweep_records(storage) if storage is not None else []
    for other in sweeps.with_journals(output_root) if output_root is not None else ():
        try:
            found += studies.sweep_records(studies.open_storage(None, other.sweep_dir))
        except Exception as exc:  # noqa: BLE001 - another sweep's unreadable journal costs its trials, not the table
            log.warning("set aside %s, which cannot be read (%s): its trials are not in the memory model", other, exc)
    unique = {(r.info.get("sweep", ""), r.case, r.number): r for r in found}
    return list(unique.values())


def trial_notes(output_root: Path) -> NotesOf:
    """What each trial's folder (under `output_root`) adds to its record (`Notes`); nothing where it is gone."""

    def read(record: TrialRecord) -> Notes:
        folder = SweepPaths.of(output_root, record.info.get("sweep", "")).sweep_dir / record.info.get("trial_dir", "")
        if not record.info.get("trial_dir") or not folder.is_dir():
            return Notes()
        env = dict(line.partition("=")[::2] for line in _head(folder / ENV).splitlines() if "=" in line)
        on_gpu = record.info.get("device") == "cuda"  # preallocation takes a share of a GPU, not of the host
        jax = on_gpu and jax_preallocates(_head(folder / CMD), env, _head(folder / STDOUT))
        return Notes(rank_peaks(_head(folder / PROGRESS, None).splitlines()), jax)

    return read


def _head(path: Path, limit: int | None = SNIFF_BYTES) -> str:
    try:
        with path.open("rb") as fh:
            return fh.read(limit if limit is not None else -1).decode(errors="replace")
    except OSError:
        return ""
