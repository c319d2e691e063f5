"""PyMARL2's DOP critic (OffPGCritic): each agent's Q-values over its own actions from the state, its
observation and its id, as a state value plus advantages, Q_i(s, o_i, .) = V + A(.). Without the other
agents' actions in its input, DOP's mixer adds the agents' Q_i into a joint value that decomposes linearly.
The layer names are PyMARL2's (fc1, fc2, fc_v, fc3), so its critic.th loads.
"""
from types import SimpleNamespace

import numpy as np
import torch as th
import torch.nn as nn
import torch.nn.functional as F

from components.episode_buffer import EpisodeBatch

HIDDEN = 256  # PyMARL2's width of both hidden layers


class OffPGCritic(nn.Module):
    def __init__(self, scheme: dict, args: SimpleNamespace):
        super().__init__()
        self.n_agents = args.n_agents
        input_dim = int(np.prod(scheme["state"]["vshape"])) + int(np.prod(scheme["obs"]["vshape"])) + self.n_agents
        self.fc1 = nn.Linear(input_dim, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.fc_v = nn.Linear(HIDDEN, 1)
        self.fc3 = nn.Linear(HIDDEN, args.n_actions)

    def forward(self, inputs: th.Tensor) -> th.Tensor:
        """inputs [..., input] (build_inputs) -> Q-values [..., n_actions]."""
        x = F.relu(self.fc2(F.relu(self.fc1(inputs))))
        return self.fc3(x) + self.fc_v(x)

    def build_inputs(self, batch: EpisodeBatch) -> th.Tensor:
        """Every agent's input at every stored step: [bs, T, n_agents, state + obs + n_agents]."""
        bs, steps, n = batch.batch_size, batch.max_seq_length, self.n_agents
        state = batch["state"].reshape(bs, steps, 1, -1).expand(-1, -1, n, -1)  # [bs, T, n, state]
        obs = batch["obs"].reshape(bs, steps, n, -1)  # [bs, T, n, obs]
        ids = th.eye(n, device=obs.device).expand(bs, steps, -1, -1)  # [bs, T, n, n]
        return th.cat([state, obs, ids], dim=-1)
