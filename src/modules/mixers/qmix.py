"""Monotonic QMIX mixer as in PyMARL2's ``modules/mixers/nmix.py``.

Hypernetworks conditioned on the global state produce the weights and biases of a
two-layer mixing network. The weights pass through a non-negative function (|x| by
default), so dQ_tot/dQ_a >= 0 for every agent: the greedy joint action of Q_tot is the
tuple of the agents' greedy actions.
"""
from types import SimpleNamespace

import numpy as np
import torch as th
import torch.nn as nn
import torch.nn.functional as F

from utils.th_utils import orthogonal_init_

POS_FUNCS = ("abs", "softplus", "quadratic")


class QMixer(nn.Module):
    """Config: n_agents, state_shape, mixing_embed_dim, hypernet_embed, optional
    qmix_pos_func ("abs" | "softplus" with qmix_pos_func_beta | "quadratic") and
    use_orthogonal."""

    def __init__(self, args: SimpleNamespace):
        super().__init__()
        self.args = args
        self.n_agents = args.n_agents
        self.embed_dim = args.mixing_embed_dim
        self.state_dim = int(np.prod(args.state_shape))
        self.pos_func_name = getattr(args, "qmix_pos_func", "abs")
        if self.pos_func_name not in POS_FUNCS:
            raise ValueError(f"unknown qmix_pos_func '{self.pos_func_name}'; "
                             f"use one of: {', '.join(POS_FUNCS)}")
        hypernet_embed = args.hypernet_embed

        # Layer 1: W1 [n_agents, embed], b1 [embed].
        self.hyper_w1 = nn.Sequential(nn.Linear(self.state_dim, hypernet_embed),
                                      nn.ReLU(inplace=True),
                                      nn.Linear(hypernet_embed, self.n_agents * self.embed_dim))
        # A one-layer Sequential keeps state_dict keys identical to PyMARL2's mixer.th.
        self.hyper_b1 = nn.Sequential(nn.Linear(self.state_dim, self.embed_dim))
        # Layer 2: W2 [embed, 1] and the state value V(s) as the final bias.
        self.hyper_w2 = nn.Sequential(nn.Linear(self.state_dim, hypernet_embed),
                                      nn.ReLU(inplace=True),
                                      nn.Linear(hypernet_embed, self.embed_dim))
        self.hyper_b2 = nn.Sequential(nn.Linear(self.state_dim, self.embed_dim),
                                      nn.ReLU(inplace=True),
                                      nn.Linear(self.embed_dim, 1))

        if getattr(args, "use_orthogonal", False):
            self._orthogonal_init()

    def _orthogonal_init(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Linear):
                orthogonal_init_(module)

    def pos_func(self, x: th.Tensor) -> th.Tensor:
        """Map hypernetwork outputs to non-negative mixing weights."""
        if self.pos_func_name == "softplus":
            return F.softplus(x, beta=self.args.qmix_pos_func_beta)
        if self.pos_func_name == "quadratic":
            return 0.5 * x ** 2
        return th.abs(x)

    def forward(self, qvals: th.Tensor, states: th.Tensor) -> th.Tensor:
        b, t, _ = qvals.size()  # qvals [batch, time, n_agents]
        qvals = qvals.reshape(b * t, 1, self.n_agents)  # [batch*time, 1, n_agents]
        states = states.reshape(b * t, self.state_dim)  # [batch*time, state_dim]

        w1 = self.pos_func(self.hyper_w1(states)).view(-1, self.n_agents, self.embed_dim)  # [b*t, n_agents, embed]
        b1 = self.hyper_b1(states).view(-1, 1, self.embed_dim)  # [b*t, 1, embed]
        w2 = self.pos_func(self.hyper_w2(states)).view(-1, self.embed_dim, 1)  # [b*t, embed, 1]
        v = self.hyper_b2(states).view(-1, 1, 1)  # [b*t, 1, 1]

        hidden = F.elu(th.bmm(qvals, w1) + b1)  # [b*t, 1, embed]
        q_tot = th.bmm(hidden, w2) + v  # [b*t, 1, 1]
        return q_tot.view(b, t, 1)  # [batch, time, 1]
