"""Qatten mixer (Yang et al. 2020, "Qatten: A General Framework for Cooperative Multiagent Reinforcement
Learning"), as PyMARL2's modules/mixers/qatten.py: Q_tot as a state-conditioned attention-weighted sum
of the agents' Q-values.

For each of n_attention_head heads, the query comes from the global state (two layers, state ->
n_query_embedding_layer1 -> n_query_embedding_layer2) and a key from each agent's own part of the state
(one layer, agent_own_state_size -> n_key_embedding_layer1); lambda_{h,i} = softmax_i(q_h . k_{h,i} /
sqrt(n_query_embedding_layer2)). With type "weighted" the heads are combined with non-negative
state-conditioned weights |w_h(s)| (two layers to n_head_embedding_layer2 = the number of heads), else
summed; a state value c(s) (two layers through n_constrant_value) is added:

    Q_tot = sum_h w_h(s) sum_i lambda_{h,i}(s) Q_i + c(s)

All weights are non-negative, so Q_tot is monotonic in every Q_i. The agents' own state features are
the first agent_own_state_size * n_agents entries of the state (SMAC's layout: each ally's health,
cooldown, relative x and y, shield and unit type), read without gradient.
"""
from types import SimpleNamespace

import numpy as np
import torch as th
import torch.nn as nn
import torch.nn.functional as F


def _two_layers(inputs: int, hidden: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, outputs))


class QattenMixer(nn.Module):
    """Config: n_agents, state_shape, agent_own_state_size (resolved to an int, see run.py), the
    n_*_embedding_layer* sizes, n_attention_head, n_constrant_value and type ("weighted" or not).
    Parameter names are PyMARL2's."""

    def __init__(self, args: SimpleNamespace):
        super().__init__()
        self.n_agents = args.n_agents
        self.state_dim = int(np.prod(args.state_shape))
        self.own_state_size = int(args.agent_own_state_size)
        if not 0 < self.own_state_size * self.n_agents <= self.state_dim:
            raise ValueError(f"agent_own_state_size={args.agent_own_state_size} does not fit the state: "
                             f"{self.n_agents} agents x {self.own_state_size} > {self.state_dim} state entries")
        self.weighted = args.type == "weighted"
        self.n_heads = args.n_attention_head
        self.query_size = args.n_query_embedding_layer2
        self.key_size = args.n_key_embedding_layer1
        if self.weighted and args.n_head_embedding_layer2 != self.n_heads:
            raise ValueError(f"type 'weighted' needs n_head_embedding_layer2 ({args.n_head_embedding_layer2}) "
                             f"= n_attention_head ({self.n_heads}): one weight per head")
        if self.key_size != self.query_size:
            raise ValueError(f"n_key_embedding_layer1 ({self.key_size}) must equal n_query_embedding_layer2 "
                             f"({self.query_size}): keys and queries are multiplied")
        self.query_embedding_layers = nn.ModuleList(
            _two_layers(self.state_dim, args.n_query_embedding_layer1, self.query_size) for _ in range(self.n_heads))
        self.key_embedding_layers = nn.ModuleList(
            nn.Linear(self.own_state_size, self.key_size) for _ in range(self.n_heads))
        self.scaled_product_value = np.sqrt(self.query_size)
        self.head_embedding_layer = _two_layers(self.state_dim, args.n_head_embedding_layer1,
                                                args.n_head_embedding_layer2)
        self.constrant_value_layer = _two_layers(self.state_dim, args.n_constrant_value, 1)

    def forward(self, agent_qs: th.Tensor, states: th.Tensor) -> th.Tensor:
        """agent_qs [batch, time, n_agents], states [batch, time, *state_shape] -> Q_tot [batch, time, 1]."""
        b, t, _ = agent_qs.shape
        states = states.reshape(b * t, self.state_dim)  # [b*t, state]
        weights = self.attention(states)  # [b*t, heads, n_agents]
        q_h = (weights * agent_qs.reshape(b * t, 1, self.n_agents)).sum(-1)  # [b*t, heads]
        if self.weighted:
            q_h = q_h * th.abs(self.head_embedding_layer(states))  # [b*t, heads]
        q_tot = q_h.sum(-1, keepdim=True) + self.constrant_value_layer(states)  # [b*t, 1]
        return q_tot.view(b, t, 1)

    def attention(self, states: th.Tensor) -> th.Tensor:
        """lambda [b*t, heads, n_agents] (each head's weights sum to 1 over the agents)."""
        with th.no_grad():
            own = states[:, :self.own_state_size * self.n_agents].reshape(-1, self.n_agents, self.own_state_size)
        heads = []
        for query_layer, key_layer in zip(self.query_embedding_layers, self.key_embedding_layers):
            query = query_layer(states).unsqueeze(1)  # [b*t, 1, query]
            keys = key_layer(own)  # [b*t, n_agents, key]
            logits = (query * keys).sum(-1) / self.scaled_product_value  # [b*t, n_agents]
            heads.append(F.softmax(logits, dim=-1))
        return th.stack(heads, dim=1)  # [b*t, heads, n_agents]
