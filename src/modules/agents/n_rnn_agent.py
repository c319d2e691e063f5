"""PyMARL2's RNN agent: the RNNAgent plus optional LayerNorm and orthogonal initialisation."""
from types import SimpleNamespace

import torch as th
import torch.nn as nn

from utils.th_utils import orthogonal_init_

from .rnn_agent import RNNAgent


class NRNNAgent(RNNAgent):
    """args.use_layer_norm: LayerNorm on the GRU output before fc2 (the recurrent memory itself
    stays un-normalised). args.use_orthogonal: orthogonal init of fc1 (gain 1) and fc2
    (gain args.gain, small by default so initial Q-values are near 0)."""

    def __init__(self, input_shape: int, args: SimpleNamespace):
        super().__init__(input_shape, args)
        use_layer_norm = getattr(args, "use_layer_norm", False)
        self.layer_norm = nn.LayerNorm(args.rnn_hidden_dim) if use_layer_norm else None
        if getattr(args, "use_orthogonal", False):
            orthogonal_init_(self.fc1)
            orthogonal_init_(self.fc2, gain=args.gain)

    def _q_features(self, h: th.Tensor) -> th.Tensor:
        return h if self.layer_norm is None else self.layer_norm(h)
