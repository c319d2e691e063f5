"""PyMARL2's LICA critic: a mixing network whose weights come from the state (hypernetworks), applied to the
agents' joint action distribution instead of their Q-values:

    h = relu(p W1(s) + b1(s)),    Q(s, p) = h w2(s) + b2(s)

with p the concatenation of every agent's action probabilities (one-hot actions when trained on the
actions taken, the policies when the actors climb it), W1 [n_agents * n_actions, embed] and w2 [embed, 1]
unconstrained in sign. W1, w2 and b2 come from two-layer hypernetworks (hypernet_embed_dim wide), b1 from
one linear layer. The layer names are PyMARL2's, so its critic.th loads.
"""
from types import SimpleNamespace

import numpy as np
import torch as th
import torch.nn as nn


def _hypernet(state_dim: int, hidden: int, out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(state_dim, hidden), nn.ReLU(), nn.Linear(hidden, out))


class LICACritic(nn.Module):
    def __init__(self, scheme: dict, args: SimpleNamespace):
        super().__init__()
        self.n_agents = args.n_agents
        self.n_actions = args.n_actions
        self.embed_dim = args.lica_mixing_embed_dim
        state_dim = int(np.prod(scheme["state"]["vshape"]))
        self.hyper_w_1 = _hypernet(state_dim, args.hypernet_embed_dim, self.n_agents * self.n_actions * self.embed_dim)
        self.hyper_w_final = _hypernet(state_dim, args.hypernet_embed_dim, self.embed_dim)
        self.hyper_b_1 = nn.Linear(state_dim, self.embed_dim)
        self.hyper_b_2 = _hypernet(state_dim, args.hypernet_embed_dim, 1)

    def forward(self, actions: th.Tensor, states: th.Tensor) -> th.Tensor:
        """actions [bs, T, n_agents, n_actions] (probabilities or one-hot), states [bs, T, state] ->
        Q [bs, T, 1]."""
        bs, steps = states.shape[:2]
        states = states.reshape(bs * steps, -1)  # [bs*T, state]
        joint = actions.reshape(bs * steps, 1, self.n_agents * self.n_actions)  # [bs*T, 1, n*A]
        w1 = self.hyper_w_1(states).view(-1, self.n_agents * self.n_actions, self.embed_dim)  # [bs*T, n*A, embed]
        b1 = self.hyper_b_1(states).view(-1, 1, self.embed_dim)  # [bs*T, 1, embed]
        hidden = th.relu(th.bmm(joint, w1) + b1)  # [bs*T, 1, embed]
        w_final = self.hyper_w_final(states).view(-1, self.embed_dim, 1)  # [bs*T, embed, 1]
        b2 = self.hyper_b_2(states).view(-1, 1, 1)  # [bs*T, 1, 1]
        return (th.bmm(hidden, w_final) + b2).view(bs, steps, 1)
