"""PyMARL2's conv_mac (qmix_conv.yaml): the basic controller for the conv agent, which sees a window of
the last `frames` steps' inputs instead of a recurrent memory.

Acting (forward, one step at a time) keeps the window as the controller's state: zeros before the
first step (init_hidden), then each step's inputs pushed in. The fused unroll (forward_sequence) builds
the same windows for every step of the stored episodes at once: the agent convolves each episode
once (ConvAgent.forward_sequence), the same values to float rounding.
"""
import torch as th
import torch.nn.functional as F

from components.episode_buffer import EpisodeBatch

from .n_controller import NMAC


class ConvMAC(NMAC):
    """hidden_states holds the window [bs, frames, n_agents, input] instead of a GRU memory."""

    def init_hidden(self, batch_size: int) -> None:
        self.hidden_states = None  # the window starts as zeros at the first forward

    def forward(self, ep_batch: EpisodeBatch, t: int, test_mode: bool = False) -> th.Tensor:
        """Q-values [bs, n_agents, n_actions] at step t from the window ending at t."""
        self.agent.train(not test_mode)
        inputs = self._build_inputs(ep_batch, t)  # [bs, n_agents, input]
        if self.hidden_states is None:
            self.hidden_states = inputs.new_zeros(inputs.shape[0], self.args.frames, *inputs.shape[1:])
        self.hidden_states = th.cat([self.hidden_states[:, 1:], inputs.unsqueeze(1)], dim=1)  # [bs, frames, n, input]
        return self.agent(self.hidden_states, None)[0]

    def forward_sequence(self, ep_batch: EpisodeBatch) -> th.Tensor:
        """Q-values [bs, T, n_agents, n_actions] for every stored step, each from its window."""
        return self._sequence_q(self.agent, self.build_sequence_inputs(ep_batch))

    def forward_sequence_pair(self, other: "ConvMAC", ep_batch: EpisodeBatch, with_memory: bool = False) -> tuple:
        if with_memory:
            raise ValueError("the conv agent has no recurrent memory to return")
        inputs = self.build_sequence_inputs(ep_batch)  # [bs, T, n_agents, input]
        with th.no_grad():
            other_q = other._sequence_q(other.agent, inputs)
        return self._sequence_q(self.agent, inputs), other_q

    def _sequence_q(self, agent, inputs: th.Tensor) -> th.Tensor:
        """Q-values [bs, T, n_agents, n_actions] of inputs [bs, T, n_agents, input], window by window."""
        frames = self.args.frames
        padded = F.pad(inputs, (0, 0, 0, 0, frames - 1, 0))  # [bs, frames - 1 + T, n_agents, input]: zeros first
        return agent.forward_sequence(padded, frames)
