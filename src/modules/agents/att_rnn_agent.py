"""PyMARL2's att_rnn agent (qmix_att.yaml): the RNN agent plus self-attention over all agents' inputs.

At each step every agent's inputs go through fc1 and the GRU as in the rnn agent; in parallel a
multi-head self-attention layer (SelfAttention, att_heads x att_embed_dim) attends over the inputs of
all agents of the same episode and step, fc2 projects its output to rnn_hidden_dim (ReLU), and the
Q-values come from fc3 (Linear-ReLU-Linear) on [GRU memory, attention features]. The attention has no
memory, so the fused unroll (forward_sequence) runs it over all steps at once.
"""
from types import SimpleNamespace

import torch as th
import torch.nn as nn
import torch.nn.functional as F

from modules.layer.self_atten import SelfAttention

from .rnn_agent import RNNAgent


class ATTRNNAgent(RNNAgent):
    """Parameter names are PyMARL2's (fc1, rnn, att, fc2 = the attention projection, fc3 = the head)."""

    def __init__(self, input_shape: int, args: SimpleNamespace):
        super().__init__(input_shape, args)
        self.att = SelfAttention(input_shape, args.att_heads, args.att_embed_dim)
        self.fc2 = nn.Linear(args.att_heads * args.att_embed_dim, args.rnn_hidden_dim)
        self.fc3 = nn.Sequential(nn.Linear(args.rnn_hidden_dim * 2, args.rnn_hidden_dim), nn.ReLU(inplace=True),
                                 nn.Linear(args.rnn_hidden_dim, args.n_actions))

    def _head(self, h: th.Tensor, inputs: th.Tensor) -> th.Tensor:
        """h [..., n_agents, hidden], inputs [..., n_agents, input] -> q [..., n_agents, n_actions]."""
        leading = inputs.shape[:-2]
        grouped = inputs.reshape(-1, *inputs.shape[-2:])  # [groups, n_agents, input]: one group per episode step
        att = F.relu(self.fc2(self.att(grouped)))  # [groups, n_agents, hidden]
        return self.fc3(th.cat([h, att.view(*leading, *att.shape[1:])], dim=-1))  # [..., n_agents, n_actions]
