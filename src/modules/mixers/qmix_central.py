"""The unrestricted central mixer of weighted QMIX (Rashid et al. 2020, "Weighted QMIX: Expanding
Monotonic Value Function Factorisation"), as PyMARL2's modules/mixers/qmix_central_no_hyper.py
(``central_mixer: ff``).

Q*(s, u) = f([state, the central agents' outputs for u]) + V(s): a plain feed-forward network (three
hidden layers of central_mixing_embed_dim, ReLU) with no sign constraint, so it can represent any joint
action-value, unlike QMIX's monotonic mixer. The central agent gives central_action_embed values per
agent for the chosen action, so the input has n_agents * central_action_embed + state entries.
"""
from types import SimpleNamespace

import numpy as np
import torch as th
import torch.nn as nn


class QMixerCentralFF(nn.Module):
    """Config: n_agents, state_shape, central_action_embed, central_mixing_embed_dim. Parameter names
    are PyMARL2's (net, V)."""

    def __init__(self, args: SimpleNamespace):
        super().__init__()
        self.n_agents = args.n_agents
        self.state_dim = int(np.prod(args.state_shape))
        self.action_embed = args.central_action_embed
        width = args.central_mixing_embed_dim
        inputs = self.n_agents * self.action_embed + self.state_dim
        self.net = nn.Sequential(nn.Linear(inputs, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                                 nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 1))
        self.V = nn.Sequential(nn.Linear(self.state_dim, width), nn.ReLU(), nn.Linear(width, 1))

    def forward(self, agent_qs: th.Tensor, states: th.Tensor) -> th.Tensor:
        """agent_qs [b, t, n_agents, central_action_embed] (or [b, t, n_agents] with an embedding of 1),
        states [b, t, *state_shape] -> Q* [b, t, 1]."""
        b = agent_qs.shape[0]
        states = states.reshape(-1, self.state_dim)  # [b*t, state]
        agent_qs = agent_qs.reshape(-1, self.n_agents * self.action_embed)  # [b*t, n_agents * embed]
        q = self.net(th.cat([states, agent_qs], dim=1)) + self.V(states)  # [b*t, 1]
        return q.view(b, -1, 1)
