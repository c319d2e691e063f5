"""Recurrent agent: fc → ReLU → GRUCell → fc, giving Q-values from one step's inputs and memory."""
from types import SimpleNamespace

import torch as th
import torch.nn as nn
import torch.nn.functional as F


class RNNAgent(nn.Module):
    def __init__(self, input_shape: int, args: SimpleNamespace):
        super().__init__()
        self.args = args
        self.hidden_dim = args.rnn_hidden_dim
        self.fc1 = nn.Linear(input_shape, args.rnn_hidden_dim)
        self.rnn = nn.GRUCell(args.rnn_hidden_dim, args.rnn_hidden_dim)
        self.fc2 = nn.Linear(args.rnn_hidden_dim, args.n_actions)

    def init_hidden(self) -> th.Tensor:
        """Zero memory on the model's device: [1, hidden]."""
        return self.fc1.weight.new_zeros(1, self.hidden_dim)

    def forward(self, inputs: th.Tensor,
                hidden_state: th.Tensor | None = None) -> tuple[th.Tensor, th.Tensor]:
        """inputs [bs, n_agents, input] (or [bs*n_agents, input]), hidden_state of matching
        leading dims (None = zeros) → (q [..., n_actions], new hidden [..., hidden])."""
        leading = inputs.shape[:-1]  # (bs, n_agents) or (bs*n_agents,)
        x = F.relu(self.fc1(inputs.reshape(-1, inputs.shape[-1])))  # [bs*n_agents, hidden]
        if hidden_state is not None:
            hidden_state = hidden_state.reshape(-1, self.hidden_dim)  # [bs*n_agents, hidden]
        h = self.rnn(x, hidden_state)  # [bs*n_agents, hidden]
        q = self.fc2(self._q_features(h))  # [bs*n_agents, n_actions]
        return q.view(*leading, -1), h.view(*leading, -1)

    def _q_features(self, h: th.Tensor) -> th.Tensor:
        """What the output layer sees of the new memory; subclasses may normalise it."""
        return h
