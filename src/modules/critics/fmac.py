"""PyMARL2's RIIT critic (FMACCritic): each agent's Q_i(o_i, id, a_i) from its observation, its id (with
obs_agent_id) and a distribution over its actions: the one-hot action taken, or its policy when the
actors climb the critic. RIIT mixes the Q_i into Q_tot with QMIX. The layer names are PyMARL2's (fc1,
fc2, fc3).
"""
from types import SimpleNamespace

import numpy as np
import torch as th
import torch.nn as nn
import torch.nn.functional as F

from components.episode_buffer import EpisodeBatch


class FMACCritic(nn.Module):
    def __init__(self, scheme: dict, args: SimpleNamespace):
        super().__init__()
        self.n_agents = args.n_agents
        self.obs_agent_id = args.obs_agent_id
        input_dim = int(np.prod(scheme["obs"]["vshape"])) + (self.n_agents if self.obs_agent_id else 0)
        self.fc1 = nn.Linear(input_dim + args.n_actions, args.critic_hidden_dim)
        self.fc2 = nn.Linear(args.critic_hidden_dim, args.critic_hidden_dim)
        self.fc3 = nn.Linear(args.critic_hidden_dim, 1)

    def forward(self, batch: EpisodeBatch, actions: th.Tensor) -> th.Tensor:
        """Q_i of every agent at the first actions.shape[1] stored steps: actions [bs, T', n_agents,
        n_actions] (one-hot or policies) -> [bs, T', n_agents, 1]."""
        inputs = th.cat([self.build_inputs(batch)[:, :actions.shape[1]], actions], dim=-1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(inputs)))))

    def build_inputs(self, batch: EpisodeBatch) -> th.Tensor:
        """Every agent's [obs, one-hot id] at every stored step: [bs, T, n_agents, input]."""
        bs, steps, n = batch.batch_size, batch.max_seq_length, self.n_agents
        parts = [batch["obs"].reshape(bs, steps, n, -1)]  # [bs, T, n, obs]
        if self.obs_agent_id:
            parts.append(th.eye(n, device=parts[0].device).expand(bs, steps, -1, -1))  # [bs, T, n, n]
        return th.cat(parts, dim=-1)
