"""PyMARL's original QMIX mixer (PyMARL2's ``modules/mixers/qmix.py``), which PyMARL2's q_learner
builds for ``mixer: qmix``.

It differs from the rewritten mixer of nq_learner (qmix.py) in its hypernetworks: with
hypernet_layers 1 (the default) the weights W1 [n_agents, embed] and w2 [embed] are single linear
layers of the state, with 2 they are Linear-ReLU-Linear through hypernet_embed units; the bias b1 is
one linear layer and the final bias V(s) two. ``abs`` (True) takes |W1| and |w2|, which makes Q_tot
monotonic in every agent's Q-value. The parameter names are PyMARL's (hyper_w_1, hyper_w_final,
hyper_b_1, V), so its mixer.th files load.
"""
from types import SimpleNamespace

import numpy as np
import torch as th
import torch.nn as nn
import torch.nn.functional as F


def _hypernet(state_dim: int, out_dim: int, layers: int, hidden: int) -> nn.Module:
    if layers == 1:
        return nn.Linear(state_dim, out_dim)
    if layers == 2:
        return nn.Sequential(nn.Linear(state_dim, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, out_dim))
    raise ValueError(f"hypernet_layers={layers} is not supported by the original QMIX mixer: use 1 or 2")


class OriginalQMixer(nn.Module):
    """Config: n_agents, state_shape, mixing_embed_dim, hypernet_layers (1), hypernet_embed (with 2
    layers) and abs (True)."""

    def __init__(self, args: SimpleNamespace):
        super().__init__()
        self.n_agents = args.n_agents
        self.state_dim = int(np.prod(args.state_shape))
        self.embed_dim = args.mixing_embed_dim
        self.abs = getattr(args, "abs", True)
        layers = getattr(args, "hypernet_layers", 1)
        hidden = getattr(args, "hypernet_embed", 64)
        self.hyper_w_1 = _hypernet(self.state_dim, self.embed_dim * self.n_agents, layers, hidden)
        self.hyper_w_final = _hypernet(self.state_dim, self.embed_dim, layers, hidden)
        self.hyper_b_1 = nn.Linear(self.state_dim, self.embed_dim)
        self.V = nn.Sequential(nn.Linear(self.state_dim, self.embed_dim), nn.ReLU(inplace=True),
                               nn.Linear(self.embed_dim, 1))

    def forward(self, agent_qs: th.Tensor, states: th.Tensor) -> th.Tensor:
        """agent_qs [batch, time, n_agents], states [batch, time, *state_shape] -> Q_tot [batch, time, 1]."""
        bs = agent_qs.size(0)
        states = states.reshape(-1, self.state_dim)  # [batch*time, state_dim]
        agent_qs = agent_qs.reshape(-1, 1, self.n_agents)  # [batch*time, 1, n_agents]
        w1 = self._weights(self.hyper_w_1(states)).view(-1, self.n_agents, self.embed_dim)  # [b*t, n_agents, embed]
        b1 = self.hyper_b_1(states).view(-1, 1, self.embed_dim)  # [b*t, 1, embed]
        hidden = F.elu(th.bmm(agent_qs, w1) + b1)  # [b*t, 1, embed]
        w_final = self._weights(self.hyper_w_final(states)).view(-1, self.embed_dim, 1)  # [b*t, embed, 1]
        v = self.V(states).view(-1, 1, 1)  # [b*t, 1, 1]
        return (th.bmm(hidden, w_final) + v).view(bs, -1, 1)  # [batch, time, 1]

    def k(self, states: th.Tensor) -> th.Tensor:
        """DOP's credit of each agent: k_i(s) = sum_e |W1(s)_ie| |w2(s)_e|, normalised to sum 1 over the
        agents (the mixer's weights with the ELU taken as linear; |.| even with abs False, as in PyMARL2).
        states [batch, time, *state_shape] -> [batch, time, n_agents]."""
        bs = states.size(0)
        states = states.reshape(-1, self.state_dim)  # [batch*time, state_dim]
        w1 = self.hyper_w_1(states).abs().view(-1, self.n_agents, self.embed_dim)  # [b*t, n_agents, embed]
        w_final = self.hyper_w_final(states).abs().view(-1, self.embed_dim, 1)  # [b*t, embed, 1]
        credit = th.bmm(w1, w_final).view(bs, -1, self.n_agents)  # [batch, time, n_agents]
        return credit / credit.sum(dim=-1, keepdim=True)

    def _weights(self, x: th.Tensor) -> th.Tensor:
        return x.abs() if self.abs else x
