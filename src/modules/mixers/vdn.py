"""VDN: Q_tot is the plain sum of the agents' Q-values."""
from types import SimpleNamespace
from typing import Optional

import torch as th
import torch.nn as nn


class VDNMixer(nn.Module):
    """Parameter-free sum mixer; takes ``args`` only to share the registry's constructor."""

    def __init__(self, args: Optional[SimpleNamespace] = None):
        super().__init__()

    def forward(self, agent_qs: th.Tensor, states: Optional[th.Tensor] = None) -> th.Tensor:
        # agent_qs [batch, time, n_agents] -> [batch, time, 1]; states are ignored.
        return th.sum(agent_qs, dim=2, keepdim=True)
