"""PyMARL2's rnn_ppo agent: the RNN agent with a second head, fc3, giving the agent's state value."""
from types import SimpleNamespace

import torch as th
import torch.nn as nn

from .rnn_agent import RNNAgent


class RNNPPOAgent(RNNAgent):
    """Outputs [..., n_actions + 1]: the policy logits (fc2) followed by the value (fc3) of the new memory."""

    def __init__(self, input_shape: int, args: SimpleNamespace):
        super().__init__(input_shape, args)
        self.fc3 = nn.Linear(args.rnn_hidden_dim, 1)

    def _head(self, h: th.Tensor, inputs: th.Tensor) -> th.Tensor:
        return th.cat([self.fc2(h), self.fc3(h)], dim=-1)  # [..., n_actions + 1]
