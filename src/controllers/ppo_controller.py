"""PyMARL2's ppo_mac: the basic controller for agents with a policy and a value head (rnn_ppo).

The agent's last output is its state value V(tau^i); the others are policy logits, turned into a
policy by the masked softmax of BasicMAC. forward and forward_sequence return both (policy, value);
the action selector sees the policy.
"""
import torch as th

from components.episode_buffer import EpisodeBatch

from .basic_controller import BasicMAC


class PPOMAC(BasicMAC):
    def __init__(self, scheme: dict, groups: dict, args):
        super().__init__(scheme, groups, args)
        if self.agent_output_type != "pi_logits":
            raise ValueError(f"ppo_mac needs agent_output_type 'pi_logits', got '{self.agent_output_type}'")

    def acting_outputs(self, ep_batch: EpisodeBatch, t: int, test_mode: bool = False) -> th.Tensor:
        return self.forward(ep_batch, t, test_mode=test_mode)[0]

    def _outputs(self, agent_outs: th.Tensor, avail_actions: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        """Agent outputs [..., n_actions + 1] -> (policy [..., n_actions], value [..., 1])."""
        logits, values = agent_outs[..., :-1], agent_outs[..., -1:]
        return super()._outputs(logits, avail_actions), values
