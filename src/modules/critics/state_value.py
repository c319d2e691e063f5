"""EPyMARL's state-value critics of its actor-critic learners (critic_type): V per agent from a
feed-forward network of two hidden layers (hidden_dim wide, ReLU), layer names fc1, fc2, fc3 as EPyMARL's.

- ``ac_critic`` (IA2C, IPPO's EPyMARL preset): agent i's input is its own observation and its one-hot id:
  an independent critic per agent (shared weights).
- ``cv_critic`` (MAA2C, MAPPO): agent i's input is the state, with obs_individual_obs all agents'
  observations, with obs_last_action the joint previous action (zeros at t = 0), and its one-hot id: a
  centralised critic.
"""
from types import SimpleNamespace

import numpy as np
import torch as th
import torch.nn as nn
import torch.nn.functional as F

from components.episode_buffer import EpisodeBatch


def _size(scheme: dict, key: str) -> int:
    return int(np.prod(scheme[key]["vshape"]))


class StateValueCritic(nn.Module):
    """What both critics share: the network and the agent ids; subclasses say what else goes in."""

    def __init__(self, input_dim: int, args: SimpleNamespace):
        super().__init__()
        self.n_agents = args.n_agents
        self.n_actions = args.n_actions
        self.args = args
        self.fc1 = nn.Linear(input_dim + self.n_agents, args.hidden_dim)
        self.fc2 = nn.Linear(args.hidden_dim, args.hidden_dim)
        self.fc3 = nn.Linear(args.hidden_dim, 1)

    def forward(self, inputs: th.Tensor) -> th.Tensor:
        """inputs [..., input] (build_inputs) -> V [..., 1]."""
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(inputs)))))

    def build_inputs(self, batch: EpisodeBatch) -> th.Tensor:
        """Every agent's input at every stored step: [bs, T, n_agents, input]."""
        bs, steps, n = batch.batch_size, batch.max_seq_length, self.n_agents
        ids = th.eye(n, device=batch.device).expand(bs, steps, -1, -1)  # [bs, T, n, n]
        return th.cat([*self._parts(batch, bs, steps), ids], dim=-1)

    def _parts(self, batch: EpisodeBatch, bs: int, steps: int) -> list:
        raise NotImplementedError


class ACCritic(StateValueCritic):
    def __init__(self, scheme: dict, args: SimpleNamespace):
        super().__init__(_size(scheme, "obs"), args)

    def _parts(self, batch: EpisodeBatch, bs: int, steps: int) -> list:
        return [batch["obs"].reshape(bs, steps, self.n_agents, -1)]  # [bs, T, n, obs]


class CentralVCritic(StateValueCritic):
    def __init__(self, scheme: dict, args: SimpleNamespace):
        n = args.n_agents
        input_dim = (_size(scheme, "state") + args.obs_individual_obs * n * _size(scheme, "obs")
                     + args.obs_last_action * n * args.n_actions)
        super().__init__(input_dim, args)

    def _parts(self, batch: EpisodeBatch, bs: int, steps: int) -> list:
        n = self.n_agents
        parts = [batch["state"].reshape(bs, steps, 1, -1)]  # [bs, T, 1, state]
        if self.args.obs_individual_obs:
            parts.append(batch["obs"].reshape(bs, steps, 1, -1))  # [bs, T, 1, n*obs]
        if self.args.obs_last_action:
            actions = F.one_hot(batch["actions"][..., 0].long(), self.n_actions).float()  # [bs, T, n, n_actions]
            joint = actions.reshape(bs, steps, 1, n * self.n_actions)  # [bs, T, 1, n*n_actions]
            parts.append(th.cat([th.zeros_like(joint[:, :1]), joint[:, :-1]], dim=1))  # the previous step's
        return [part.expand(-1, -1, n, -1) for part in parts]  # each [bs, T, n, part]
