"""EPyMARL's critics of its actor-critic learners (critic_type): V per agent (or MADDPG's Q per agent) from a
feed-forward network of two hidden layers (hidden_dim wide, ReLU), layer names fc1, fc2, fc3 as EPyMARL's.

- ``ac_critic`` (IA2C, IPPO's EPyMARL preset): agent i's input is its own observation and its one-hot id:
  an independent critic per agent (shared weights).
- ``cv_critic`` (MAA2C, MAPPO): agent i's input is the state, with obs_individual_obs all agents'
  observations, with obs_last_action the joint previous action (zeros at t = 0), and its one-hot id: a
  centralised critic.
- ``ac_critic_ns``, ``cv_critic_ns`` (the _ns configs): the same inputs without the id, each agent its own
  network (AgentLinear layers: one batched matmul for all agents).
- ``maddpg_critic``, ``maddpg_critic_ns`` (MADDPG): Q_i of the state and the joint action (below).
- ``coma_critic``, ``coma_critic_ns`` (EPyMARL's COMA): Q_i(s, u_{-i}, .) over agent i's own actions (below).
"""
from types import SimpleNamespace

import numpy as np
import torch as th
import torch.nn as nn
import torch.nn.functional as F

from components.episode_buffer import EpisodeBatch
from modules.agents.rnn_ns_agent import AgentLinear
from utils.th_utils import one_hot, previous_steps

from .coma import others_mask


def scheme_size(scheme: dict, key: str) -> int:
    """How many numbers one entry of `key` holds: its vshape flattened (the critics' input widths)."""
    return int(np.prod(scheme[key]["vshape"]))


def stored_actions_onehot(batch: EpisodeBatch, n_actions: int) -> th.Tensor:
    """The one-hot actions of every stored step [bs, T, n, n_actions], zeros past an episode's last stored
    step, as EPyMARL's batch holds them (its n-step returns read a critic there: add_value_last_step)."""
    filled = batch["filled"].reshape(batch.batch_size, batch.max_seq_length, 1, 1)  # [bs, T, 1, 1]
    return one_hot(batch["actions"], n_actions) * filled


class StateValueCritic(nn.Module):
    """What the critics share: the network and the agent ids; subclasses say what else goes in. With
    `per_agent` (EPyMARL's _ns critics) every agent has its own network (AgentLinear layers) and no id;
    `with_id` False leaves the id out of a shared network too (MADDPG's critic with obs_agent_id False)."""

    def __init__(self, input_dim: int, args: SimpleNamespace, per_agent: bool = False, out_dim: int = 1,
                 with_id: bool = True):
        super().__init__()
        self.n_agents = args.n_agents
        self.n_actions = args.n_actions
        self.args = args
        self.per_agent = per_agent
        self.with_id = with_id and not per_agent
        hidden = args.hidden_dim
        if per_agent:
            n = self.n_agents
            self.fc1, self.fc2, self.fc3 = AgentLinear(n, input_dim, hidden), AgentLinear(n, hidden, hidden), \
                AgentLinear(n, hidden, out_dim)
        else:
            self.fc1 = nn.Linear(input_dim + self.with_id * self.n_agents, hidden)
            self.fc2 = nn.Linear(hidden, hidden)
            self.fc3 = nn.Linear(hidden, out_dim)

    def forward(self, inputs: th.Tensor) -> th.Tensor:
        """inputs [..., n_agents, input] (build_inputs) -> V [..., n_agents, out_dim] (out_dim 1 but PAC's)."""
        return self.head(self.fc1(inputs))

    def head(self, first_layer: th.Tensor) -> th.Tensor:
        """The network after fc1: fc1's output [..., n_agents, hidden] -> [..., n_agents, out_dim]."""
        return self.fc3(F.relu(self.fc2(F.relu(first_layer))))

    def first_layer_part(self, inputs: th.Tensor, columns: slice, with_bias: bool) -> th.Tensor:
        """fc1 applied to some of its input columns only (inputs [..., n_agents, those columns] -> [..., n_agents,
        hidden]); fc1(cat(x, y)) is the part of x with the bias plus the part of y without it."""
        if self.per_agent:
            out = th.einsum("...ni,nio->...no", inputs, self.fc1.weight[:, columns])  # AgentLinear: [n, in, out]
        else:
            out = inputs @ self.fc1.weight[:, columns].T  # nn.Linear: [out, in]
        return out + self.fc1.bias if with_bias else out

    def build_inputs(self, batch: EpisodeBatch) -> th.Tensor:
        """Every agent's input at every stored step: [bs, T, n_agents, input]."""
        bs, steps, n = batch.batch_size, batch.max_seq_length, self.n_agents
        parts = self._parts(batch, bs, steps)
        if self.with_id:
            parts.append(th.eye(n, device=batch.device).expand(bs, steps, -1, -1))  # [bs, T, n, n]
        return th.cat(parts, dim=-1)

    def _parts(self, batch: EpisodeBatch, bs: int, steps: int) -> list:
        raise NotImplementedError


class ACCritic(StateValueCritic):
    def __init__(self, scheme: dict, args: SimpleNamespace, per_agent: bool = False):
        super().__init__(scheme_size(scheme, "obs"), args, per_agent)

    def _parts(self, batch: EpisodeBatch, bs: int, steps: int) -> list:
        return [batch["obs"].reshape(bs, steps, self.n_agents, -1)]  # [bs, T, n, obs]


class CentralVCritic(StateValueCritic):
    def __init__(self, scheme: dict, args: SimpleNamespace, per_agent: bool = False, extra_inputs: int = 0,
                 out_dim: int = 1, with_id: bool = True):
        """extra_inputs: the width of what a subclass joins to these inputs (PAC's other agents' actions)."""
        n = args.n_agents
        input_dim = (scheme_size(scheme, "state") + args.obs_individual_obs * n * scheme_size(scheme, "obs")
                     + args.obs_last_action * n * args.n_actions)
        super().__init__(input_dim + extra_inputs, args, per_agent, out_dim, with_id)

    def _parts(self, batch: EpisodeBatch, bs: int, steps: int) -> list:
        n = self.n_agents
        parts = [batch["state"].reshape(bs, steps, 1, -1)]  # [bs, T, 1, state]
        if self.args.obs_individual_obs:
            parts.append(batch["obs"].reshape(bs, steps, 1, -1))  # [bs, T, 1, n*obs]
        if self.args.obs_last_action:
            actions = stored_actions_onehot(batch, self.n_actions)  # [bs, T, n, n_actions]
            parts.append(previous_steps(actions.reshape(bs, steps, 1, n * self.n_actions)))  # [bs, T, 1, n*n_actions]
        return [part.expand(-1, -1, n, -1) for part in parts]  # each [bs, T, n, part]


class ACCriticNS(ACCritic):
    """ac_critic_ns: every agent its own critic of its observation (no id)."""

    def __init__(self, scheme: dict, args: SimpleNamespace):
        super().__init__(scheme, args, per_agent=True)


class CentralVCriticNS(CentralVCritic):
    """cv_critic_ns: every agent its own critic of the state (no id)."""

    def __init__(self, scheme: dict, args: SimpleNamespace):
        super().__init__(scheme, args, per_agent=True)


class MADDPGCritic(StateValueCritic):
    """EPyMARL's ``maddpg_critic``: Q_i(s, u) of agent i from the state (with obs_individual_obs its own
    observation, with obs_last_action its own previous action), its id (with obs_agent_id, as EPyMARL's), and
    everyone's actions as one-hots
    [n_agents * n_actions] joined last, so that the learner can hand each agent's critic actions with their
    own gradients. With `per_agent` (``maddpg_critic_ns``) every agent its own network, without the id."""

    def __init__(self, scheme: dict, args: SimpleNamespace, per_agent: bool = False):
        input_dim = (scheme_size(scheme, "state") + args.obs_individual_obs * scheme_size(scheme, "obs")
                     + args.obs_last_action * args.n_actions + args.n_agents * args.n_actions)
        super().__init__(input_dim, args, per_agent, with_id=args.obs_agent_id)

    def forward(self, inputs: th.Tensor, joint_actions: th.Tensor) -> th.Tensor:
        """inputs [..., n_agents, input] (build_inputs), joint_actions [..., n_agents, n_agents * n_actions]
        -> Q [..., n_agents, 1]."""
        return super().forward(th.cat([inputs, joint_actions], dim=-1))

    def _parts(self, batch: EpisodeBatch, bs: int, steps: int) -> list:
        n = self.n_agents
        parts = [batch["state"].reshape(bs, steps, 1, -1).expand(-1, -1, n, -1)]  # [bs, T, n, state]
        if self.args.obs_individual_obs:
            parts.append(batch["obs"].reshape(bs, steps, n, -1))  # [bs, T, n, obs]
        if self.args.obs_last_action:
            parts.append(previous_steps(one_hot(batch["actions"], self.n_actions)))  # [bs, T, n, n_actions]
        return parts


class MADDPGCriticNS(MADDPGCritic):
    """maddpg_critic_ns: every agent its own critic (no id)."""

    def __init__(self, scheme: dict, args: SimpleNamespace):
        super().__init__(scheme, args, per_agent=True)


class EPyMARLCOMACritic(StateValueCritic):
    """EPyMARL's ``coma_critic`` (config coma_epymarl): Q_i(s, u_{-i}, .) over agent i's own actions from the
    state (with obs_individual_obs its own observation), the joint action with its own zeroed, with
    obs_last_action the previous joint action, and with obs_agent_id its id: PyMARL2's COMA critic inputs
    (modules/critics/coma.py) with EPyMARL's optional parts and width. With `per_agent` (``coma_critic_ns``)
    every agent its own network, without the id. The actions of steps past an episode's last stored step are
    zeros, as in EPyMARL's batch (stored_actions_onehot)."""

    def __init__(self, scheme: dict, args: SimpleNamespace, per_agent: bool = False):
        n, n_actions = args.n_agents, args.n_actions
        input_dim = (scheme_size(scheme, "state") + args.obs_individual_obs * scheme_size(scheme, "obs")
                     + (1 + args.obs_last_action) * n * n_actions)
        super().__init__(input_dim, args, per_agent, out_dim=n_actions, with_id=args.obs_agent_id)

    def _parts(self, batch: EpisodeBatch, bs: int, steps: int) -> list:
        n = self.n_agents
        joint = stored_actions_onehot(batch, self.n_actions).reshape(bs, steps, 1, -1)  # [bs, T, 1, n*A]
        parts = [batch["state"].reshape(bs, steps, 1, -1).expand(-1, -1, n, -1)]  # [bs, T, n, state]
        if self.args.obs_individual_obs:
            parts.append(batch["obs"].reshape(bs, steps, n, -1))  # [bs, T, n, obs]
        parts.append(joint * others_mask(n, self.n_actions, joint.device))  # [bs, T, n, n*A]
        if self.args.obs_last_action:
            parts.append(previous_steps(joint).expand(-1, -1, n, -1))  # [bs, T, n, n*A]
        return parts


class EPyMARLCOMACriticNS(EPyMARLCOMACritic):
    """coma_critic_ns: every agent its own critic (no id)."""

    def __init__(self, scheme: dict, args: SimpleNamespace):
        super().__init__(scheme, args, per_agent=True)
