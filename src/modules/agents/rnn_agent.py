"""Recurrent agent: fc → ReLU → GRUCell → fc, giving Q-values from one step's inputs and memory
(with EPyMARL's use_rnn=False: fc → ReLU → fc → ReLU → fc, no memory).

forward runs one step (acting); forward_sequence runs whole episodes with the same weights and
math: the layers without memory (fc1, fc2) see all steps in one matmul each, and only the GRU's
recurrence steps through time (gru_sequence: the GRUCell's math with a hand-written backward pass).
forward_sequence_pair, what the learner trains with, runs a second agent (its target network)
beside it, their GRUs in one loop.
"""
from types import SimpleNamespace

import torch as th
import torch.nn as nn
import torch.nn.functional as F

from utils.th_utils import autocast_dtype

from .gru_sequence import gru_sequence, gru_sequence_pair


class RNNAgent(nn.Module):
    def __init__(self, input_shape: int, args: SimpleNamespace):
        super().__init__()
        self.args = args
        self.hidden_dim = args.rnn_hidden_dim
        self.fc1 = nn.Linear(input_shape, args.rnn_hidden_dim)
        # EPyMARL's use_rnn=False: a feed-forward layer (ReLU) in the GRU's place, no memory
        self.recurrent = getattr(args, "use_rnn", True)
        layer = nn.GRUCell if self.recurrent else nn.Linear
        self.rnn = layer(args.rnn_hidden_dim, args.rnn_hidden_dim)
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
        if not self.recurrent:
            h = F.relu(self.rnn(x)).view(*leading, -1)  # [..., hidden]
            return self._head(h, inputs), h
        if hidden_state is not None:
            hidden_state = hidden_state.reshape(-1, self.hidden_dim)  # [bs*n_agents, hidden]
        h = self.rnn(x, hidden_state).view(*leading, -1)  # [..., hidden]
        return self._head(h, inputs), h  # [..., n_actions], [..., hidden]

    def forward_sequence(self, inputs: th.Tensor, hidden_state: th.Tensor | None = None,
                         detach_every: int | None = None) -> th.Tensor:
        """inputs [bs, T, n_agents, input], hidden_state [bs, n_agents, hidden] before step 0
        (None = zeros) → q [bs, T, n_agents, n_actions]: what T calls of forward would give. The
        steps are processed time-major: inputs laid out so in memory are read in place, and q is a
        view of a time-major tensor. Under autocast the GRU's matmuls run in autocast's dtype, its
        gates and memory in the cell's. With `detach_every` the gradients are truncated (the same
        values; see _truncated_memory)."""
        bs, _, n_agents, _ = inputs.shape
        if hidden_state is not None:
            hidden_state = hidden_state.reshape(bs * n_agents, self.hidden_dim)  # [bs*n_agents, hidden]
        x = self._sequence_features(inputs)  # [T, bs*n_agents, hidden]
        if not self.recurrent:
            return self._sequence_q(F.relu(self.rnn(x)), inputs)
        dtype = autocast_dtype(inputs.device)
        if detach_every is None:
            h = gru_sequence(self.rnn, x, hidden_state, dtype)  # [T, bs*n_agents, hidden]
        else:
            h = self._truncated_memory(x, hidden_state, detach_every, dtype)
        return self._sequence_q(h, inputs)

    def _truncated_memory(self, x: th.Tensor, h0: th.Tensor | None, detach_every: int,
                          dtype: th.dtype | None) -> th.Tensor:
        """Truncated backpropagation through time, as benellis3/mappo's agent and critic detach their memory
        at every step t with t % detach_every == 0 (its controllers/basic_controller.py and
        modules/critics/centralV_rnn_critic.py): the GRU runs over chunks of detach_every steps, each from the
        memory the previous one ended with, detached, so no gradient crosses a chunk boundary.
        x [T, rows, hidden] -> the memory after each step [T, rows, hidden]."""
        memories = []
        for start in range(0, x.shape[0], detach_every):
            h0 = None if h0 is None else h0.detach()
            memories.append(gru_sequence(self.rnn, x[start:start + detach_every], h0, dtype))  # [chunk, rows, hidden]
            h0 = memories[-1][-1]  # [rows, hidden]
        return th.cat(memories)

    def forward_sequence_pair(self, other: "RNNAgent", inputs: th.Tensor, with_memory: bool = False) -> tuple:
        """forward_sequence of this agent (with gradients) and of `other`, an agent of the same
        sizes (the target network; without gradients), on the same inputs from zero memory: their
        GRUs step through time in one loop (gru_sequence_pair). Two [bs, T, n_agents, n_actions],
        and with `with_memory` the two GRU memories after each step [bs, T, n_agents, hidden] too."""
        bs, steps, n_agents, _ = inputs.shape
        x = self._sequence_features(inputs)  # [T, bs*n_agents, hidden]
        with th.no_grad():
            other_x = other._sequence_features(inputs)
        if self.recurrent:
            h, other_h = gru_sequence_pair(self.rnn, x, None, autocast_dtype(inputs.device),
                                           other=(other.rnn, other_x))  # [T, bs*n_agents, hidden] each
        else:
            h = F.relu(self.rnn(x))
            with th.no_grad():
                other_h = F.relu(other.rnn(other_x))
        with th.no_grad():
            other_q = other._sequence_q(other_h, inputs)
        outputs = (self._sequence_q(h, inputs), other_q)
        if not with_memory:
            return outputs
        memories = tuple(m.view(steps, bs, n_agents, -1).transpose(0, 1) for m in (h, other_h))  # [bs, T, n, hidden]
        return outputs + memories

    def _sequence_features(self, inputs: th.Tensor) -> th.Tensor:
        """The GRU's inputs for every step: inputs [bs, T, n_agents, input] → [T, bs*n_agents, hidden]."""
        bs, steps, n_agents, _ = inputs.shape
        x = F.relu(self.fc1(inputs.transpose(0, 1)))  # [T, bs, n_agents, hidden]
        return x.reshape(steps, bs * n_agents, self.hidden_dim)  # [T, bs*n_agents, hidden]

    def _sequence_q(self, h: th.Tensor, inputs: th.Tensor) -> th.Tensor:
        """The GRU memory after each step [T, bs*n_agents, hidden] and the inputs [bs, T, n_agents, input]
        → q [bs, T, n_agents, n_actions], a view of a time-major tensor."""
        bs, steps, n_agents, _ = inputs.shape
        q = self._head(h.view(steps, bs, n_agents, -1), inputs.transpose(0, 1))  # [T, bs, n_agents, n_actions]
        return q.transpose(0, 1)  # [bs, T, n_agents, n_actions]

    def _head(self, h: th.Tensor, inputs: th.Tensor) -> th.Tensor:
        """Q-values from the new memory h [..., hidden] (and the step's inputs [..., input], same
        leading dims, which agents that look at them use): [..., n_actions]."""
        return self.fc2(self._q_features(h))

    def _q_features(self, h: th.Tensor) -> th.Tensor:
        """What the output layer sees of the new memory; subclasses may normalise it."""
        return h
