"""PyMARL2's dop_mac: the basic controller whose training-mode policies already carry the action
selector's epsilon floor,

    pi' = (1 - epsilon) * pi + epsilon / n

with n the available actions (mask_before_softmax, then 0 on the unavailable ones) or all actions. The
multinomial selector then mixes in its floor a second time while acting, as PyMARL2 does; the learner
trains pi' (forward and forward_sequence); test episodes (test_mode) see pi alone.
"""
import torch as th

from components.episode_buffer import EpisodeBatch

from .basic_controller import BasicMAC


class DOPMAC(BasicMAC):
    def __init__(self, scheme: dict, groups: dict, args):
        super().__init__(scheme, groups, args)
        if self.agent_output_type != "pi_logits" or not hasattr(self.action_selector, "epsilon"):
            raise ValueError("dop_mac needs agent_output_type 'pi_logits' and a selector with an epsilon "
                             "(multinomial)")

    def forward(self, ep_batch: EpisodeBatch, t: int, test_mode: bool = False) -> th.Tensor:
        policies = super().forward(ep_batch, t, test_mode=test_mode)
        return policies if test_mode else self._epsilon_floor(policies, ep_batch["avail_actions"][:, t])

    def forward_sequence(self, ep_batch: EpisodeBatch) -> th.Tensor:
        return self._epsilon_floor(super().forward_sequence(ep_batch), ep_batch["avail_actions"])

    def _epsilon_floor(self, policies: th.Tensor, avail_actions: th.Tensor) -> th.Tensor:
        """pi' of policies [..., n_actions] with the selector's current epsilon."""
        epsilon = self.action_selector.epsilon
        if not getattr(self.args, "mask_before_softmax", True):
            return (1 - epsilon) * policies + epsilon / self.n_actions
        available = avail_actions.to(policies.dtype)
        n_available = available.sum(-1, keepdim=True).clamp(min=1)  # padded steps have none
        return ((1 - epsilon) * policies + epsilon / n_available) * available
