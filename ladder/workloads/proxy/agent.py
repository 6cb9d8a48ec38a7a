"""The agent config: the keys of a MimicKit agent YAML that shape the proxy's work and memory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ladder.core.errors import ConfigError

NET_WIDTHS: dict[str, tuple[int, ...]] = {
    "fc_2layers_1024units": (1024, 1024),
    "fc_3layers_1024units": (1024, 1024, 512),
}
METHODS = ("amp", "add", "ase", "vault", "deepmimic", "ppo", "awr", "lcp", "smp")
DISC_METHODS = frozenset({"amp", "add", "ase", "vault"})
MIN_WIDTH = 8  # units per layer, whatever the width factor


@dataclass(frozen=True)
class OptimSpec:
    """One ``*_optimizer`` block of the agent YAML."""

    kind: str  # "SGD" or "Adam"
    lr: float
    weight_decay: float


@dataclass(frozen=True)
class AgentSpec:
    """The keys of a MimicKit agent YAML that shape work and memory; roles are actor, critic, disc, enc."""

    nets: dict[str, tuple[int, ...]]  # role -> hidden widths, already scaled by --width-factor
    optims: dict[str, OptimSpec]  # role -> optimizer
    epochs: dict[str, int]  # role -> passes over the rollout per iteration
    batch_sizes: dict[str, int]  # role -> minibatch size in multiples of num_envs
    steps_per_iter: int
    discount: float
    td_lambda: float
    ppo_clip_ratio: float
    adv_clip: float  # normalized advantages are clipped to ±this
    action_std: float  # fixed Gaussian policy std
    disc_buffer_size: int  # replay rows (0 without a discriminator)
    disc_grad_penalty: float
    latent_dim: int  # ase skill latent (0 otherwise)


def roles_for(method: str) -> tuple[str, ...]:
    if method == "ase":
        return ("actor", "critic", "disc", "enc")
    return ("actor", "critic", "disc") if method in DISC_METHODS else ("actor", "critic")


def scaled_widths(net_name: str, factor: float) -> tuple[int, ...]:
    if net_name not in NET_WIDTHS:
        raise ConfigError(f"unknown net {net_name!r}", f"use one of the known nets: {', '.join(NET_WIDTHS)}")
    return tuple(max(MIN_WIDTH, round(w * factor)) for w in NET_WIDTHS[net_name])


def _key(cfg: dict[str, Any], key: str, where: Path) -> Any:
    if key not in cfg:
        raise ConfigError(f"{where} has no {key!r}", "use a MimicKit agent YAML that matches --method")
    return cfg[key]


def _positive(cfg: dict[str, Any], key: str, where: Path) -> int:
    value = int(_key(cfg, key, where))
    if value < 1:
        raise ConfigError(f"{where}: {key} is {value}", f"set {key} to 1 or more")
    return value


def _optim(cfg: dict[str, Any], role: str, where: Path) -> OptimSpec:
    block = _key(cfg, f"{role}_optimizer", where)
    kind = str(block.get("type", "SGD"))
    if kind not in ("SGD", "Adam"):
        raise ConfigError(f"{where}: {role}_optimizer.type {kind!r} is not supported", "use SGD or Adam")
    return OptimSpec(kind, float(block["learning_rate"]), float(block.get("weight_decay", 0.0)))


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        cfg = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"cannot read agent config {path}: {e}", "pass a MimicKit agent YAML") from e
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path} is not a YAML mapping", "pass a MimicKit agent YAML")
    return cfg


def load_agent(path: Path, method: str, width_factor: float) -> AgentSpec:
    cfg = read_yaml(path)
    model, roles = _key(cfg, "model", path), roles_for(method)
    return AgentSpec(
        nets={r: scaled_widths(str(_key(model, f"{r}_net", path)), width_factor) for r in roles},
        optims={r: _optim(cfg, r, path) for r in roles},
        epochs={r: _positive(cfg, f"{r}_epochs", path) for r in roles},
        batch_sizes={r: _positive(cfg, f"{r}_batch_size", path) for r in roles},
        steps_per_iter=_positive(cfg, "steps_per_iter", path),
        discount=float(_key(cfg, "discount", path)),
        td_lambda=float(_key(cfg, "td_lambda", path)),
        ppo_clip_ratio=float(cfg.get("ppo_clip_ratio", 0.2)),  # awr configs have none
        adv_clip=float(cfg.get("norm_adv_clip", 4.0)),
        action_std=float(model.get("action_std", 0.05)),
        disc_buffer_size=_positive(cfg, "disc_buffer_size", path) if "disc" in roles else 0,
        disc_grad_penalty=float(cfg.get("disc_grad_penalty", 0.0)),
        latent_dim=int(_key(model, "latent_dim", path)) if "enc" in roles else 0,
    )
