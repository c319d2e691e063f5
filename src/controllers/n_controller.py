"""PyMARL2's n_mac: the basic controller for value-based agents."""
import torch as th

from .basic_controller import BasicMAC


class NMAC(BasicMAC):
    """Agent outputs are always used as raw Q-values (no policy softmax), whatever
    agent_output_type says."""

    def _outputs(self, agent_outs: th.Tensor, avail_actions: th.Tensor) -> th.Tensor:
        return agent_outs
