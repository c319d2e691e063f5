"""QPLEX's duplex dueling mixer (Wang et al. 2021, "QPLEX: Duplex Dueling Multi-Agent Q-Learning"), as
PyMARL2's modules/mixers/dmaq_general.py and dmaq_si_weight.py (the "dmaq" mixer of qplex.yaml).

Each agent's Q_i is first mapped to a joint-value frame with a positive weight and a bias of the state
(weighted_head): Q'_i = w_i(s) Q_i + v_i(s), w_i = |hyper_w_final(s)| + 1e-10, v_i = V(s). With the
agents' greedy values max Q'_i and advantages A_i = Q'_i - max Q'_i (no gradient through A_i, as in
PyMARL2):

    Q_tot(s, a) = V_tot(s) + A_tot(s, a),   V_tot = sum_i Q'_i,   A_tot = sum_i A_i (lambda_i(s, a) - 1)

(is_minus_one; without it A_tot = sum_i A_i lambda_i). The importance weights lambda_i(s, a) > 0 come
from num_kernel attention heads: |key(s)| * sigmoid(agents(s))_i * sigmoid(action(s, a))_i, summed over
heads. Since every A_i <= 0 and lambda_i > 0, the greedy joint action of the Q_i is greedy for Q_tot
(the IGM principle), while the (lambda_i - 1) weights let Q_tot represent non-monotonic values.
The learner (dmaq_qatten_learner.py) calls the mixer twice: is_v=True gives V_tot (with the Q'_i of
the chosen actions: sum_i Q'_i), is_v=False the advantage part A_tot.
"""
from types import SimpleNamespace

import numpy as np
import torch as th
import torch.nn as nn


def _extractor(inputs: int, outputs: int, layers: int, hidden: int) -> nn.Module:
    """PyMARL2's adv_hypernet_layers: 1 -> Linear; 2 -> Linear-ReLU-Linear; 3 -> two hidden layers."""
    if layers == 1:
        return nn.Linear(inputs, outputs)
    if layers == 2:
        return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, outputs))
    if layers == 3:
        return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                             nn.Linear(hidden, outputs))
    raise ValueError(f"adv_hypernet_layers={layers} is not supported: use 1, 2 or 3")


class SIWeight(nn.Module):
    """lambda_i(s, a) [b*t, n_agents]: PyMARL2's DMAQ_SI_Weight (parameter names key_extractors,
    agents_extractors, action_extractors)."""

    def __init__(self, args: SimpleNamespace):
        super().__init__()
        self.n_agents = args.n_agents
        self.state_dim = int(np.prod(args.state_shape))
        self.action_dim = args.n_agents * args.n_actions
        layers, hidden = args.adv_hypernet_layers, args.adv_hypernet_embed
        kernels = range(args.num_kernel)
        self.key_extractors = nn.ModuleList(_extractor(self.state_dim, 1, layers, hidden) for _ in kernels)
        self.agents_extractors = nn.ModuleList(_extractor(self.state_dim, self.n_agents, layers, hidden)
                                               for _ in kernels)
        self.action_extractors = nn.ModuleList(_extractor(self.state_dim + self.action_dim, self.n_agents, layers,
                                                          hidden) for _ in kernels)

    def forward(self, states: th.Tensor, actions: th.Tensor) -> th.Tensor:
        """states [b*t, state], actions [b*t, n_agents * n_actions] (one-hot) -> [b*t, n_agents]."""
        state_actions = th.cat([states, actions], dim=1)
        weights = 0
        for key, agents, action in zip(self.key_extractors, self.agents_extractors, self.action_extractors):
            weights = weights + (th.abs(key(states)) + 1e-10) * th.sigmoid(agents(states)) \
                * th.sigmoid(action(state_actions))  # [b*t, n_agents]
        return weights


class DMAQMixer(nn.Module):
    """Config: n_agents, n_actions, state_shape, hypernet_embed, num_kernel, adv_hypernet_layers,
    adv_hypernet_embed, weighted_head, is_minus_one. Parameter names are PyMARL2's DMAQer's."""

    def __init__(self, args: SimpleNamespace):
        super().__init__()
        self.n_agents = args.n_agents
        self.n_actions = args.n_actions
        self.state_dim = int(np.prod(args.state_shape))
        self.weighted_head = args.weighted_head
        self.is_minus_one = args.is_minus_one
        hidden = args.hypernet_embed
        self.hyper_w_final = nn.Sequential(nn.Linear(self.state_dim, hidden), nn.ReLU(),
                                           nn.Linear(hidden, self.n_agents))
        self.V = nn.Sequential(nn.Linear(self.state_dim, hidden), nn.ReLU(), nn.Linear(hidden, self.n_agents))
        self.si_weight = SIWeight(args)

    def forward(self, agent_qs: th.Tensor, states: th.Tensor, actions: th.Tensor | None = None,
                max_q_i: th.Tensor | None = None, is_v: bool = False) -> th.Tensor:
        """agent_qs [b, t, n_agents], states [b, t, *state_shape]; with is_v the value part V_tot, else
        the advantage part A_tot for the one-hot joint actions [b, t, n_agents, n_actions] and the
        agents' greedy Q-values max_q_i [b, t, n_agents]: [b, t, 1]."""
        b, t, _ = agent_qs.shape
        states = states.reshape(b * t, self.state_dim)  # [b*t, state]
        agent_qs = self._transformed(agent_qs.reshape(b * t, self.n_agents), states)  # [b*t, n_agents]
        if is_v:
            return agent_qs.sum(-1).view(b, t, 1)
        max_q_i = self._transformed(max_q_i.reshape(b * t, self.n_agents), states)  # [b*t, n_agents]
        advantages = (agent_qs - max_q_i).detach()  # [b*t, n_agents], <= 0
        weights = self.si_weight(states, actions.reshape(b * t, -1))  # [b*t, n_agents]
        if self.is_minus_one:
            weights = weights - 1.0
        return (advantages * weights).sum(-1).view(b, t, 1)

    def _transformed(self, qs: th.Tensor, states: th.Tensor) -> th.Tensor:
        """Q'_i = w_i(s) Q_i + v_i(s) with weighted_head, else Q_i unchanged: [b*t, n_agents]."""
        if not self.weighted_head:
            return qs
        return (th.abs(self.hyper_w_final(states)) + 1e-10) * qs + self.V(states)
