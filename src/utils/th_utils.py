"""Small torch helpers shared by the agents, controllers, mixers and learners."""
from typing import Callable

import torch as th
import torch.nn as nn


def orthogonal_init_(layer: nn.Linear, gain: float = 1.0) -> None:
    """Orthogonal weights scaled by `gain`, zero bias."""
    nn.init.orthogonal_(layer.weight, gain=gain)
    nn.init.zeros_(layer.bias)


def one_hot(actions: th.Tensor, n_actions: int) -> th.Tensor:
    """Actions [..., 1] (integers) -> one-hot [..., n_actions] in float32."""
    return th.nn.functional.one_hot(actions.squeeze(-1).long(), n_actions).float()


def previous_steps(x: th.Tensor) -> th.Tensor:
    """x [bs, T, ...] one step later in time: step t holds x's step t - 1, zeros at t = 0 (e.g. last actions)."""
    return th.cat([th.zeros_like(x[:, :1]), x[:, :-1]], dim=1)


def follow_targets(interval_or_tau: float, steps: int, last_copy: int, hard_copy: Callable[[], None],
                   pairs: list[tuple[nn.Module, nn.Module]]) -> int:
    """EPyMARL's target_update_interval_or_tau, after training step number `steps`: above 1 it is an
    interval, and ``hard_copy()`` runs once that many steps have passed since `last_copy`; at most 1 it is
    tau, and every (target, online) module pair moves target <- (1 - tau) target + tau online. Returns the
    step of the last hard copy."""
    if interval_or_tau > 1:
        if (steps - last_copy) / interval_or_tau >= 1.0:
            hard_copy()
            return steps
        return last_copy
    with th.no_grad():
        for target, online in pairs:
            for target_param, param in zip(target.parameters(), online.parameters()):
                target_param.mul_(1.0 - interval_or_tau).add_(param * interval_or_tau)
    return last_copy


def autocast_dtype(device: th.device) -> th.dtype | None:
    """The dtype autocast gives matmuls on `device` right now; None when autocast is off there."""
    device_type = th.device(device).type
    return th.get_autocast_dtype(device_type) if th.is_autocast_enabled(device_type) else None


TRAIN_PRECISIONS = ("auto", "float32", "bfloat16")
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # x86 instructions that multiply bfloat16 natively


def cpu_bf16_flag(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The first of CPU_BF16_FLAGS this CPU has (read from `cpuinfo`; None where unreadable, e.g. not Linux)."""
    try:
        with open(cpuinfo) as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return None
    return next((flag for flag in CPU_BF16_FLAGS if flag in flags), None)


def resolve_train_precision(precision: str, device: str) -> tuple[str, str]:
    """(dtype of the training step's matmuls, "float32" or "bfloat16", and why) for the config key
    train_precision on `device`. "auto" is bfloat16 on a CPU with native bfloat16 instructions
    (cpu_bf16_flag), where it halves the step; float32 elsewhere: emulated bfloat16 is slower,
    and the bfloat16 path is untested on GPUs."""
    if precision not in TRAIN_PRECISIONS:
        raise ValueError(f"train_precision={precision!r} is not one of {', '.join(TRAIN_PRECISIONS)}: auto uses "
                         f"bfloat16 where the CPU multiplies it natively, float32 elsewhere")
    if precision != "auto":
        return precision, "set by train_precision"
    if th.device(device).type != "cpu":
        return "float32", f"auto: bfloat16 is untested on {device}"
    flag = cpu_bf16_flag()
    if flag is None:
        return "float32", "auto: this CPU has no native bfloat16 instructions"
    return "bfloat16", f"auto: this CPU has {flag}"
