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
        """qvals [batch, time, n_agents], states [batch, time, *state_shape] -> Q_tot [batch, time, 1].

        The hypernetworks run in the autocast dtype when autocast is on; the mixing itself (the
        products with the agents' Q-values) in the Q-values' dtype, at least float32."""
        b, t, _ = qvals.size()
        dtype = th.promote_types(qvals.dtype, th.float32)
        qvals = qvals.reshape(b * t, self.n_agents, 1).to(dtype)  # [b*t, n_agents, 1]
        # [batch, time, state_dim]: a view even of a time slice, which the first layer reads (and
        # under autocast casts) without a copy first
        states = states.reshape(b, t, self.state_dim)
        w1_hidden, b1, w2_hidden, v_hidden = self._state_layers(states)

        w1 = self.pos_func(self.hyper_w1[2](F.relu(w1_hidden)).to(dtype))  # [b*t, n_agents*embed]
        w2 = self.pos_func(self.hyper_w2[2](F.relu(w2_hidden)).to(dtype))  # [b*t, embed]
        v = self.hyper_b2[2](F.relu(v_hidden)).to(dtype)  # [b*t, 1]

        # Row by row [1, n_agents] @ [n_agents, embed] and [1, embed] @ [embed, 1], as products and
        # sums: bmm is several times slower on such tiny matrices.
        w1 = w1.view(-1, self.n_agents, self.embed_dim)  # [b*t, n_agents, embed]
        hidden = F.elu((qvals * w1).sum(1) + b1.to(dtype))  # [b*t, embed]
        q_tot = (hidden * w2).sum(1, keepdim=True) + v  # [b*t, 1]
        return q_tot.view(b, t, 1)  # [batch, time, 1]

    def _state_layers(self, states: th.Tensor) -> list:
        """The four hypernetwork layers that read the state, as one matmul (the state is read, and
        under autocast cast, once): states [b, t, state_dim] -> [hyper_w1 hidden, b1, hyper_w2
        hidden, hyper_b2 hidden], each [b*t, out_features]."""
        layers = (self.hyper_w1[0], self.hyper_b1[0], self.hyper_w2[0], self.hyper_b2[0])
        weight = th.cat([layer.weight for layer in layers])  # [sum of out_features, state_dim]
        bias = th.cat([layer.bias for layer in layers])
        outputs = F.linear(states, weight, bias)  # [b, t, sum of out_features]
        outputs = outputs.reshape(-1, outputs.shape[-1])  # [b*t, sum of out_features]
        return outputs.split([layer.out_features for layer in layers], dim=1)
