"""PyMARL2's conv agent (qmix_conv.yaml): Q-values from a 1-D convolution over the last `frames` steps'
inputs instead of a recurrent memory.

inputs [b, frames, n_agents, input] -> per agent a Conv1d (kernel 2) and a Conv1d (kernel 3) over the
frames axis with rnn_hidden_dim channels (ReLU each), leaving frames - 3 positions, then fc1 (ReLU) and
fc2 -> q [b, n_agents, n_actions]. It has no memory: the conv controller (controllers/conv_controller.py)
keeps the window of frames when acting, and training runs forward_sequence over whole episodes.
"""
from types import SimpleNamespace

import torch as th
import torch.nn as nn
import torch.nn.functional as F


class ConvAgent(nn.Module):
    def __init__(self, input_shape: int, args: SimpleNamespace):
        super().__init__()
        self.hidden_dim = args.rnn_hidden_dim
        if args.frames < 4:
            raise ValueError(f"conv_agent needs frames >= 4 (two convolutions of widths 2 and 3), got {args.frames}")
        self.conv1 = nn.Conv1d(input_shape, self.hidden_dim, 2)
        self.conv2 = nn.Conv1d(self.hidden_dim, self.hidden_dim, 3)
        self.linear_hidden_dim = (args.frames - 3) * self.hidden_dim
        self.fc1 = nn.Linear(self.linear_hidden_dim, self.hidden_dim)
        self.fc2 = nn.Linear(self.hidden_dim, args.n_actions)

    def init_hidden(self) -> None:
        return None

    def forward(self, inputs: th.Tensor, hidden_state: None = None) -> tuple[th.Tensor, None]:
        """inputs [b, frames, n_agents, input] -> (q [b, n_agents, n_actions], None)."""
        b, frames, n_agents, channels = inputs.shape
        x = inputs.permute(0, 2, 3, 1).reshape(b * n_agents, channels, frames)  # [b*n_agents, input, frames]
        x = F.relu(self.conv2(F.relu(self.conv1(x))))  # [b*n_agents, hidden, frames - 3]
        x = F.relu(self.fc1(x.reshape(b, n_agents, self.linear_hidden_dim)))  # [b, n_agents, hidden]
        return self.fc2(x), None  # [b, n_agents, n_actions]

    def forward_sequence(self, padded: th.Tensor, frames: int) -> th.Tensor:
        """Q-values of every window of `frames` consecutive steps of padded [bs, frames - 1 + T, n_agents,
        input] (the episode behind frames - 1 steps of zeros) -> [bs, T, n_agents, n_actions].

        Consecutive windows overlap, so both convolutions run once along the whole episode and each
        window takes its frames - 3 positions of the result: the values of forward() on each window
        (to float rounding), for a fraction of the work."""
        bs, length, n_agents, channels = padded.shape
        steps = length - frames + 1
        x = padded.permute(0, 2, 3, 1).reshape(bs * n_agents, channels, length)  # [bs*n_agents, input, length]
        x = F.relu(self.conv2(F.relu(self.conv1(x))))  # [bs*n_agents, hidden, length - 3]
        x = x.unfold(2, frames - 3, 1)  # [bs*n_agents, hidden, T, frames - 3]
        x = x.permute(0, 2, 1, 3).reshape(bs, n_agents, steps, self.linear_hidden_dim)  # hidden-major, as forward()
        x = F.relu(self.fc1(x.transpose(1, 2)))  # [bs, T, n_agents, hidden]
        return self.fc2(x)  # [bs, T, n_agents, n_actions]
