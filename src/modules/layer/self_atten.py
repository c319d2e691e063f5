"""Multi-head dot-product self-attention over a set of entities (PyMARL2's modules/layer/self_atten.py),
as the att_rnn agent uses it over the agents' inputs at one step."""
import torch as th
import torch.nn as nn
import torch.nn.functional as F


class SelfAttention(nn.Module):
    """x [batch, entities, input] -> [batch, entities, heads * embed]: each entity's values attended
    with softmax(q_i . k_j / sqrt(embed)) over all entities j, per head (queries and keys each scaled
    by embed^(-1/4)); no biases, as in PyMARL2."""

    def __init__(self, input_size: int, heads: int, embed_size: int):
        super().__init__()
        self.input_size = input_size
        self.heads = heads
        self.embed_size = embed_size
        self.tokeys = nn.Linear(input_size, embed_size * heads, bias=False)
        self.toqueries = nn.Linear(input_size, embed_size * heads, bias=False)
        self.tovalues = nn.Linear(input_size, embed_size * heads, bias=False)

    def forward(self, x: th.Tensor) -> th.Tensor:
        b, t, _ = x.shape
        h, e = self.heads, self.embed_size
        scale = e ** 0.25
        keys = self._heads(self.tokeys(x), b, t) / scale  # [b*h, t, e]
        queries = self._heads(self.toqueries(x), b, t) / scale  # [b*h, t, e]
        values = self._heads(self.tovalues(x), b, t)  # [b*h, t, e]
        weights = F.softmax(th.bmm(queries, keys.transpose(1, 2)), dim=2)  # [b*h, t, t]
        out = th.bmm(weights, values).view(b, h, t, e)  # [b, h, t, e]
        return out.transpose(1, 2).reshape(b, t, h * e)  # [b, t, h*e]

    def _heads(self, projected: th.Tensor, b: int, t: int) -> th.Tensor:
        """[b, t, h*e] -> [b*h, t, e]: the heads folded into the batch."""
        return projected.view(b, t, self.heads, self.embed_size).transpose(1, 2).reshape(b * self.heads, t, -1)
