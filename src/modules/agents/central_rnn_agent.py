"""PyMARL2's central_rnn agent: the RNN agent of the unrestricted central Q of weighted QMIX (OW/CW-QMIX).

Its output layer gives central_action_embed values per action ([..., n_actions * central_action_embed]);
the central controller reads them as [..., n_actions, central_action_embed]. As in PyMARL2 its GRU has
rnn_hidden_dim units (the central_rnn_hidden_dim of the algorithm YAMLs is not read).
"""
from types import SimpleNamespace

import torch.nn as nn

from .rnn_agent import RNNAgent


class CentralRNNAgent(RNNAgent):
    def __init__(self, input_shape: int, args: SimpleNamespace):
        super().__init__(input_shape, args)
        self.fc2 = nn.Linear(args.rnn_hidden_dim, args.n_actions * args.central_action_embed)
