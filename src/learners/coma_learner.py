"""PyMARL2's COMA learner (``learner: coma_learner``): counterfactual multi-agent policy gradients.

One train call on a batch (T stored steps, T-1 transitions):

1. Critic (COMACritic, modules/critics/coma.py), trained step by step backwards in time, one Adam
   step (critic_lr) per transition t = T-2 .. 0 that has a valid step, on

       loss_t = sum over valid (episode, agent) of (Q(s_t, u_t)_i - y_t^i)^2 / their number

   with y the TD(lambda) returns (td_lambda) of the target critic's Q of the actions taken, computed
   once before the loop. The target critic is refreshed every target_update_interval critic steps
   (checked once per train call, after the actor's step).
2. Actor, one Adam step (lr) on the policy pi (the controller's softmax, renormalised over the
   available actions) with the critic's Q-values of step 1 (each from just before its update):

       A^i_t   = Q(s_t, u_t)_i - sum_a pi^i(a | tau_t) Q(s_t, (u_t^{-i}, a))_i    (the counterfactual baseline)
       loss    = -mean over valid (t, i) of A^i_t log pi^i(u_t^i) - entropy * mean entropy of pi^i

Stats under PyMARL2's names: critic_loss, critic_grad_norm, td_error_abs, q_taken_mean, target_mean
(means over the critic's steps), advantage_mean, coma_loss, agent_grad_norm, pi_max. The entropy
term is PyMARL2's (coma.yaml's entropy 0.09); PyMARL2's critic_q_fn, critic_baseline_fn,
critic_train_mode, critic_train_reps and q_nstep are set by its YAML but read by no code.
"""
from types import SimpleNamespace

import torch as th

from components.episode_buffer import EpisodeBatch
from modules.critics import COMACritic
from utils.rl_utils import build_td_lambda_targets

from .policy_learner import PolicyLearner, entropy, masked_mean, taken
from .q_learner import Transitions, batch_transitions

CRITIC_STATS = ("critic_loss", "critic_grad_norm", "td_error_abs", "q_taken_mean", "target_mean")


def renormalise_available(policies: th.Tensor, avail_actions: th.Tensor) -> th.Tensor:
    """Policies [..., n_actions] restricted to the available actions and summing to 1 over them, as
    the multinomial selector acts; all zeros where no action is available (padded steps)."""
    policies = policies * avail_actions
    total = policies.sum(-1, keepdim=True)  # [..., 1]
    return th.where(total > 0, policies / total.clamp(min=th.finfo(policies.dtype).tiny), 0.0)


def counterfactual_advantages(policies: th.Tensor, q_values: th.Tensor, actions: th.Tensor) -> th.Tensor:
    """COMA's advantages Q(s, u)_i - sum_a pi^i(a) Q(s, (u^{-i}, a))_i: policies and q_values
    [..., n_actions], actions [..., 1] (long) -> [...], without gradients."""
    baseline = (policies * q_values).sum(-1)  # [...]
    return (taken(q_values, actions) - baseline).detach()


class COMALearner(PolicyLearner):
    """Trains ``mac`` (a policy: agent_output_type pi_logits) and the COMA critic."""

    COUNTERS = ("log_stats_t", "critic_training_steps", "last_target_update_step")

    def __init__(self, mac, scheme: dict, logger, args: SimpleNamespace):
        super().__init__(mac, logger, args)
        self._add_critic(COMACritic(scheme, args))

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int, per_weight: th.Tensor | None = None) -> dict:
        """The critic's steps, then one actor step; per_weight (prioritized replay) is refused at construction."""
        data = batch_transitions(batch)
        q_values, critic_stats = self._train_critic(batch, data, t_env)  # [bs, T-1, n_agents, n_actions]
        policies = self._policies(batch)[:, :-1]  # [bs, T-1, n_agents, n_actions]
        policies = renormalise_available(policies, batch["avail_actions"][:, :-1])
        loss, stats = self._actor_loss(policies, q_values, data)
        grad_norm = self._optimise(self.agent_optimiser, self.agent_params, loss, t_env)

        self._refresh_targets(self.critic_training_steps)

        if self._logging(t_env):
            means = {key: sum(values) / len(values) for key, values in critic_stats.items()}
            self._log({**means, **stats, "agent_grad_norm": grad_norm}, t_env)
        return {}

    def _actor_loss(self, policies: th.Tensor, q_values: th.Tensor, data: Transitions) -> tuple[th.Tensor, dict]:
        """COMA's policy loss with the entropy bonus, and its stats."""
        mask = data.mask  # [bs, T-1, 1]: broadcasts over the agents
        advantages = counterfactual_advantages(policies, q_values, data.actions)  # [bs, T-1, n_agents]
        # Padded steps have no available action: their (zero) probability is replaced before the log.
        pi_taken = taken(policies, data.actions).masked_fill(mask.expand_as(advantages) == 0, 1.0)
        coma_loss = -masked_mean(advantages * th.log(pi_taken), mask)
        loss = coma_loss - self.args.entropy * masked_mean(entropy(policies), mask)
        stats = {"advantage_mean": masked_mean(advantages, mask), "coma_loss": coma_loss.detach(),
                 "pi_max": masked_mean(policies.detach().max(dim=-1)[0], mask)}
        return loss, stats

    def _train_critic(self, batch: EpisodeBatch, data: Transitions, t_env: int) -> tuple[th.Tensor, dict]:
        """The critic's steps backwards in time; the Q-values of every transition [bs, T-1, n_agents,
        n_actions] (each from before its step) and the lists of the steps' stats."""
        with th.no_grad():
            inputs = self.critic.build_inputs(batch)  # [bs, T, n_agents, input]
            all_actions = batch["actions"].long()  # [bs, T, n_agents, 1]
            target_taken = taken(self.target_critic(inputs), all_actions)  # [bs, T, n_agents]
            targets = build_td_lambda_targets(data.rewards, data.terminated, data.mask, target_taken, self.n_agents,
                                              self.args.gamma, self.args.td_lambda)  # [bs, T-1, n_agents]
        q_values = inputs.new_zeros(*targets.shape, self.n_actions)  # [bs, T-1, n_agents, n_actions]
        stats = {key: [] for key in CRITIC_STATS}
        for t in reversed(range(targets.shape[1])):
            mask_t = data.mask[:, t].expand(-1, self.n_agents)  # [bs, n_agents]
            n_valid = mask_t.sum().item()
            if n_valid == 0:
                continue
            q_t = self.critic(inputs[:, t])  # [bs, n_agents, n_actions]
            q_values[:, t] = q_t.detach()
            q_taken = taken(q_t, data.actions[:, t])  # [bs, n_agents]
            masked_td_error = (q_taken - targets[:, t]) * mask_t
            loss = masked_td_error.pow(2).sum() / n_valid
            grad_norm = self._optimise(self.critic_optimiser, self.critic_params, loss, t_env)
            self.critic_training_steps += 1
            stats["critic_loss"].append(loss.item())
            stats["critic_grad_norm"].append(grad_norm.item())
            stats["td_error_abs"].append(masked_td_error.abs().sum().item() / n_valid)
            stats["q_taken_mean"].append((q_taken.detach() * mask_t).sum().item() / n_valid)
            stats["target_mean"].append((targets[:, t] * mask_t).sum().item() / n_valid)
        return q_values, stats
