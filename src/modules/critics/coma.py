"""PyMARL2's COMA critic: a centralised feed-forward Q(s, u) per agent over that agent's own actions.

Agent i's input at step t is [state s_t, its observation o_t^i, the joint action u_t with agent i's
own action zeroed, the joint action u_{t-1} (zeros at t = 0), one-hot i]; the output is Q(s_t,
(u_t^{-i}, a)) for each of its actions a, so that one forward pass gives every action COMA's
counterfactual baseline needs. The layer names are PyMARL2's (fc1, fc2, fc3), so its critic.th loads.
"""
from types import SimpleNamespace

import numpy as np
import torch as th
import torch.nn as nn
import torch.nn.functional as F

from components.episode_buffer import EpisodeBatch
from utils.th_utils import one_hot, previous_steps

HIDDEN = 128  # PyMARL2's width of both hidden layers


def others_mask(n_agents: int, n_actions: int, device: th.device | str | None = None) -> th.Tensor:
    """[n_agents, n_agents * n_actions]: row i is 0 on agent i's actions, 1 on the others' (what each agent's
    COMA critic sees of the joint action)."""
    others = 1 - th.eye(n_agents, device=device)  # [n, n]
    return others.repeat_interleave(n_actions, dim=1)  # [n, n*n_actions]


class COMACritic(nn.Module):
    def __init__(self, scheme: dict, args: SimpleNamespace):
        super().__init__()
        self.n_agents = args.n_agents
        self.n_actions = args.n_actions
        state_dim = int(np.prod(scheme["state"]["vshape"]))
        obs_dim = int(np.prod(scheme["obs"]["vshape"]))
        input_dim = state_dim + obs_dim + 2 * self.n_agents * self.n_actions + self.n_agents
        self.fc1 = nn.Linear(input_dim, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.fc3 = nn.Linear(HIDDEN, self.n_actions)

    def forward(self, inputs: th.Tensor) -> th.Tensor:
        """inputs [..., input] (build_inputs) -> Q-values [..., n_actions]."""
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(inputs)))))

    def build_inputs(self, batch: EpisodeBatch) -> th.Tensor:
        """Every agent's input at every stored step: [bs, T, n_agents, input]."""
        bs, steps, n = batch.batch_size, batch.max_seq_length, self.n_agents
        state = batch["state"].reshape(bs, steps, 1, -1).expand(-1, -1, n, -1)  # [bs, T, n, state]
        obs = batch["obs"].reshape(bs, steps, n, -1)  # [bs, T, n, obs]
        actions = one_hot(batch["actions"], self.n_actions)  # [bs, T, n, n_actions]
        joint = actions.reshape(bs, steps, 1, n * self.n_actions)  # [bs, T, 1, n*n_actions]
        others = joint * others_mask(n, self.n_actions, actions.device)  # [bs, T, n, n*n_actions]
        last_joint = previous_steps(joint).expand(-1, -1, n, -1)  # [bs, T, n, n*n_actions]
        ids = th.eye(n, device=actions.device).expand(bs, steps, -1, -1)  # [bs, T, n, n]
        return th.cat([state, obs, others, last_joint, ids], dim=-1)  # [bs, T, n, input]

