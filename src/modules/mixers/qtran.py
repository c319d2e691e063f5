"""QTRAN's joint networks (Son et al. 2019, "QTRAN: Learning to Factorize with Transformation for
Cooperative Multi-Agent Reinforcement Learning"), as PyMARL2's modules/mixers/qtran.py (``qtran_base``).

QTRAN does not mix the agents' Q-values into Q_tot. It learns an unrestricted joint action-value
Q_jt(s, u) and a state value V_jt(s) beside them, and ties them to the sum of the agents' Q-values
with the losses of qtran_learner.py, whose minimum makes the agents' greedy actions greedy for Q_jt:
    sum_i Q_i(greedy) - Q_jt(s, greedy) + V_jt(s) = 0       (opt)
    sum_i Q_i(u)      - Q_jt(s, u)      + V_jt(s) >= 0      (nopt)
Architectures (qtran_arch):
  "qtran_paper"  Q_jt takes [state, sum_i e(h_i, u_i)]: each agent's GRU memory h_i [hidden] and its
                 one-hot action u_i pass through a small encoder e (Linear-ReLU-Linear of width
                 hidden + n_actions), summed over the agents, so the input has the same size for
                 any number of agents
  "coma_critic"  Q_jt takes [state, all agents' one-hot actions]
network_size "small" gives Q_jt and V_jt two hidden layers of mixing_embed_dim, "big" three.
Parameter names are PyMARL2's (Q, V, action_encoding).
"""
from types import SimpleNamespace

import numpy as np
import torch as th
import torch.nn as nn

ARCHITECTURES = ("qtran_paper", "coma_critic")
HIDDEN_LAYERS = {"small": 2, "big": 3}  # network_size -> hidden layers of Q_jt and V_jt


def _mlp(inputs: int, width: int, hidden_layers: int) -> nn.Sequential:
    """inputs -> hidden_layers x (Linear width, ReLU) -> Linear 1."""
    layers = []
    for index in range(hidden_layers):
        layers += [nn.Linear(inputs if index == 0 else width, width), nn.ReLU(inplace=True)]
    return nn.Sequential(*layers, nn.Linear(width, 1))


class QTranBase(nn.Module):
    """Config: n_agents, n_actions, state_shape, rnn_hidden_dim, mixing_embed_dim, qtran_arch,
    network_size."""

    def __init__(self, args: SimpleNamespace):
        super().__init__()
        self.n_agents = args.n_agents
        self.n_actions = args.n_actions
        self.state_dim = int(np.prod(args.state_shape))
        self.arch = args.qtran_arch
        if self.arch not in ARCHITECTURES:
            raise ValueError(f"unknown qtran_arch '{self.arch}'; use one of: {', '.join(ARCHITECTURES)}")
        if args.network_size not in HIDDEN_LAYERS:
            raise ValueError(f"unknown network_size '{args.network_size}'; use one of: {', '.join(HIDDEN_LAYERS)}")
        hidden_layers = HIDDEN_LAYERS[args.network_size]
        encoding = args.rnn_hidden_dim + self.n_actions
        if self.arch == "qtran_paper":
            q_inputs = self.state_dim + encoding
        else:
            q_inputs = self.state_dim + self.n_agents * self.n_actions
        self.Q = _mlp(q_inputs, args.mixing_embed_dim, hidden_layers)
        self.V = _mlp(self.state_dim, args.mixing_embed_dim, hidden_layers)
        self.action_encoding = nn.Sequential(nn.Linear(encoding, encoding), nn.ReLU(inplace=True),
                                             nn.Linear(encoding, encoding))

    def forward(self, states: th.Tensor, hidden_states: th.Tensor, actions: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        """states [b, t, *state_shape], the agents' GRU memories hidden_states [b, t, n_agents, hidden]
        and one-hot joint actions [b, t, n_agents, n_actions] -> (Q_jt, V_jt), each [b, t, 1]."""
        b, t = states.shape[:2]
        states = states.reshape(b * t, self.state_dim)  # [b*t, state]
        if self.arch == "qtran_paper":
            agent_inputs = th.cat([hidden_states, actions.to(hidden_states)], dim=-1)  # [b, t, n_agents, hidden + n_actions]
            encoded = self.action_encoding(agent_inputs).sum(dim=2)  # [b, t, hidden + n_actions], summed over agents
            q_inputs = th.cat([states, encoded.reshape(b * t, -1)], dim=1)  # [b*t, state + hidden + n_actions]
        else:
            q_inputs = th.cat([states, actions.reshape(b * t, -1).to(states)], dim=1)  # [b*t, state + n_agents*n_actions]
        return self.Q(q_inputs).view(b, t, 1), self.V(states).view(b, t, 1)
