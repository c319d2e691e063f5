"""Small torch helpers shared by the agents, controllers and mixers."""
import torch as th
import torch.nn as nn


def orthogonal_init_(layer: nn.Linear, gain: float = 1.0) -> None:
    """Orthogonal weights scaled by `gain`, zero bias."""
    nn.init.orthogonal_(layer.weight, gain=gain)
    nn.init.zeros_(layer.bias)


def autocast_dtype(device: th.device) -> th.dtype | None:
    """The dtype autocast gives matmuls on `device` right now; None when autocast is off there."""
    device_type = th.device(device).type
    return th.get_autocast_dtype(device_type) if th.is_autocast_enabled(device_type) else None
