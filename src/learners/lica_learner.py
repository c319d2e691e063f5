"""PyMARL2's LICA learner (``learner: lica_learner``): learning implicit credit assignment.

The LICA critic (modules/critics/lica.py) is a mixing network, conditioned on the state, of the agents'
joint action distribution. One train call on a batch (T stored steps, T-1 transitions):

1. Critic, one Adam step (critic_lr) on the one-hot actions taken:

       loss = mean over valid t of (Q(s_t, u_t) - y_t)^2

   with y the TD(lambda) returns (td_lambda) of the target critic's Q(s_t, u_t). The target critic is
   refreshed every target_update_interval critic steps.
2. Actors, one Adam step (lr) that climbs the critic through the policies themselves (the critic's
   gradient with respect to each agent's action probabilities is its implicit credit):

       H    = mean over valid (t, i) of the entropy of pi^i(. | tau_t)
       loss = -mean over valid t of Q(s_t, pi_t) - (entropy_coef / H) * H

   pi the controller's softmax renormalised over the available actions. Dividing by H's value is LICA's
   adaptive entropy regularisation (policy_learner.adaptive_entropy_loss).

Stats under PyMARL2's names: critic_loss, critic_grad_norm, td_error_abs, q_t_mean, target_mean,
mix_loss (the actor's whole loss), entropy, agent_grad_norm. PyMARL2's lica.yaml also sets
critics_update_num, critic and hypernet_layers, which no code reads (one critic step per batch, the
critic is LICA's, its hypernetworks have two layers).
"""
from types import SimpleNamespace

import torch as th

from components.episode_buffer import EpisodeBatch
from modules.critics import LICACritic
from utils.rl_utils import build_td_lambda_targets
from utils.th_utils import one_hot

from .coma_learner import renormalise_available
from .policy_learner import PolicyLearner, adaptive_entropy_loss, entropy, masked_mean
from .q_learner import Transitions, batch_transitions


class LICALearner(PolicyLearner):
    """Trains ``mac`` (a policy: agent_output_type pi_logits) and the LICA critic."""

    COUNTERS = ("log_stats_t", "critic_training_steps", "last_target_update_step")

    def __init__(self, mac, scheme: dict, logger, args: SimpleNamespace):
        super().__init__(mac, logger, args)
        self._add_critic(LICACritic(scheme, args))

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int, per_weight: th.Tensor | None = None) -> dict:
        """The critic's step, then the actors'; per_weight (prioritized replay) is refused at construction."""
        data = batch_transitions(batch)
        critic_stats = self._train_critic(batch, data, t_env)
        policies = self._policies(batch)[:, :-1]  # [bs, T-1, n_agents, n_actions]
        policies = renormalise_available(policies, batch["avail_actions"][:, :-1])
        loss, stats = self._actor_loss(policies, batch["state"][:, :-1], data.mask)
        grad_norm = self._optimise(self.agent_optimiser, self.agent_params, loss, t_env)
        if self._logging(t_env):
            self._log({**critic_stats, **stats, "agent_grad_norm": grad_norm}, t_env)
        return {}

    def _actor_loss(self, policies: th.Tensor, states: th.Tensor, mask: th.Tensor) -> tuple[th.Tensor, dict]:
        """The actors' loss of policies [bs, T-1, n_agents, n_actions] in states [bs, T-1, state], and its stats."""
        mix_value = masked_mean(self.critic(policies, states), mask)  # critic output [bs, T-1, 1]
        mean_entropy = masked_mean(entropy(policies).mean(-1, keepdim=True), mask)  # agents' mean [bs, T-1, 1]
        loss = adaptive_entropy_loss(mix_value, mean_entropy, self.args.entropy_coef)
        return loss, {"mix_loss": loss.detach(), "entropy": mean_entropy.detach()}

    def _train_critic(self, batch: EpisodeBatch, data: Transitions, t_env: int) -> dict:
        """One critic step on the actions taken; its stats."""
        actions = one_hot(batch["actions"], self.n_actions)  # [bs, T, n_agents, n_actions]
        states = batch["state"]  # [bs, T, state]
        with th.no_grad():
            target_q = self.target_critic(actions, states)  # [bs, T, 1]
            targets = build_td_lambda_targets(data.rewards, data.terminated, data.mask, target_q, self.n_agents,
                                              self.args.gamma, self.args.td_lambda)  # [bs, T-1, 1]
        q_t = self.critic(actions[:, :-1], states[:, :-1])  # [bs, T-1, 1]
        masked_td_error = (q_t - targets) * data.mask
        n_valid = data.mask.sum()
        loss = masked_td_error.pow(2).sum() / n_valid
        grad_norm = self._optimise(self.critic_optimiser, self.critic_params, loss, t_env)
        self.critic_training_steps += 1
        self._refresh_targets(self.critic_training_steps)
        return {"critic_loss": loss.detach(), "critic_grad_norm": grad_norm,
                "td_error_abs": masked_td_error.detach().abs().sum() / n_valid,
                "q_t_mean": masked_mean(q_t.detach(), data.mask), "target_mean": masked_mean(targets, data.mask)}
