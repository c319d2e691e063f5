"""PyMARL2's n_mac: the basic controller for value-based agents."""
import torch as th

from components.episode_buffer import EpisodeBatch

from .basic_controller import BasicMAC


class NMAC(BasicMAC):
    """Agent outputs are always used as raw Q-values (no policy softmax), whatever
    agent_output_type says."""

    def forward(self, ep_batch: EpisodeBatch, t: int, test_mode: bool = False) -> th.Tensor:
        """Q-values [bs, n_agents, n_actions] at step t; advances hidden_states."""
        return self._run_agent(ep_batch, t, test_mode)
