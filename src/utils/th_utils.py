"""Small torch helpers shared by the agents and the mixers."""
import torch.nn as nn


def orthogonal_init_(layer: nn.Linear, gain: float = 1.0) -> None:
    """Orthogonal weights scaled by `gain`, zero bias."""
    nn.init.orthogonal_(layer.weight, gain=gain)
    nn.init.zeros_(layer.bias)
