"""PyMARL2's DOP learner (``learner: offpg_learner``): off-policy multi-agent decomposed policy gradients.

The critic is a mixture of per-agent Q_i (OffPGCritic: from the state, the agent's observation and id)
through PyMARL's original QMIX mixer, Q_tot(s, u) = mixer(Q_1(u_1) .. Q_n(u_n), s). DOP's training loop
(run.DOPTrainingLoop) calls, per iteration:

1. train_critic(on_batch, off_batch): targets for the on-policy sample are TD(lambda) returns (td_lambda)
   of the target Q_tot; for the off-policy sample tree-backup returns (tb_lambda, `step` steps;
   utils/rl_utils.build_tree_backup_targets) that weight later TD errors by the current policy's joint
   probability of the actions taken. The two samples are then trained together, step by step forwards in
   time: one RMSprop step (lr, for the critic and the mixer alike) per transition with a valid step,

       loss_t = mean over valid episodes of (Q_tot(s_t, u_t) - y_t)^2

   The target critic and mixer are refreshed every target_update_interval critic steps.
2. train(newest batch): one RMSprop step (lr) of the actors on the decomposed counterfactual policy gradient

       A^i_t = Q_i(u^i_t) - sum_a pi^i(a) Q_i(a)       (the critic's, without gradient)
       loss  = -mean over valid (t, i) of k_i(s_t) A^i_t log pi^i(u^i_t)

   with k_i(s) the mixer's normalised credit of agent i (OriginalQMixer.k) and pi the controller's
   policies with dop_mac's epsilon floor, renormalised over the available actions.

Stats under PyMARL2's names: critic_loss, critic_grad_norm, td_error_abs, q_taken_mean, target_mean,
q_max_mean, q_min_mean, q_max_var, q_min_var (means over the critic's steps), q_max_first, q_min_first,
coma_loss, agent_grad_norm, pi_max. As in PyMARL2, critic_lr and ent_coef are set by dop.yaml but unused
(every optimiser runs at lr; PyMARL2's entropy term is commented out).
"""
import copy
from types import SimpleNamespace
from typing import NamedTuple

import torch as th
from torch.optim import RMSprop

from components.episode_buffer import EpisodeBatch
from modules.critics import OffPGCritic
from modules.mixers import REGISTRY as mixer_REGISTRY
from utils.rl_utils import build_td_lambda_targets, build_tree_backup_targets

from .coma_learner import counterfactual_advantages, renormalise_available
from .policy_learner import PolicyLearner, masked_mean, taken
from .q_learner import batch_transitions

CRITIC_STATS = ("critic_loss", "critic_grad_norm", "td_error_abs", "q_taken_mean", "target_mean", "q_max_mean",
                "q_min_mean", "q_max_var", "q_min_var")


class CriticData(NamedTuple):
    """A sample's critic training data over its T-1 transitions: inputs [bs, T-1, n_agents, input], actions
    [bs, T-1, n_agents, 1] (long), states [bs, T-1, state], mask and targets [bs, T-1, 1]."""
    inputs: th.Tensor
    actions: th.Tensor
    states: th.Tensor
    mask: th.Tensor
    targets: th.Tensor


def pad_steps(values: th.Tensor, steps: int) -> th.Tensor:
    """values [bs, T, ...] with zeros appended along time up to `steps`."""
    return th.cat([values, values.new_zeros(values.shape[0], steps - values.shape[1], *values.shape[2:])], dim=1)


def concat_samples(first: CriticData, second: CriticData) -> CriticData:
    """Two samples' critic data as one batch, the shorter padded (mask 0) to the longer's steps."""
    steps = max(first.mask.shape[1], second.mask.shape[1])
    return CriticData(*(th.cat([pad_steps(a, steps), pad_steps(b, steps)], dim=0) for a, b in zip(first, second)))


class OffPGLearner(PolicyLearner):
    """Trains ``mac`` (dop_mac: a policy), the DOP critic and its QMIX mixer."""

    COUNTERS = ("log_stats_t", "critic_training_steps", "last_target_update_step")

    def __init__(self, mac, scheme: dict, logger, args: SimpleNamespace):
        super().__init__(mac, logger, args)
        if args.run != "dop_run":
            raise ValueError(f"offpg_learner trains in DOP's loop (run dop_run, as dop.yaml sets), not run {args.run}")
        self.critic = OffPGCritic(scheme, args)
        self.mixer = mixer_REGISTRY["qmix_original"](args)  # PyMARL2's modules/mixers/qmix.py
        self.target_critic = copy.deepcopy(self.critic)
        self.target_mixer = copy.deepcopy(self.mixer)
        self.agent_params = list(mac.parameters())
        self.critic_params = list(self.critic.parameters()) + list(self.mixer.parameters())
        self.agent_optimiser = RMSprop(params=self.agent_params, lr=args.lr)
        self.critic_optimiser = RMSprop(params=list(self.critic.parameters()), lr=args.lr)
        self.mixer_optimiser = RMSprop(params=list(self.mixer.parameters()), lr=args.lr)
        self.networks = {"critic.th": self.critic, "mixer.th": self.mixer}
        self.target_networks = {"critic.th": self.target_critic, "mixer.th": self.target_mixer}
        self.optimisers = {"agent_opt.th": self.agent_optimiser, "critic_opt.th": self.critic_optimiser,
                           "mixer_opt.th": self.mixer_optimiser}
        self.critic_training_steps = 0
        self.last_target_update_step = 0
        self.critic_stats = {}  # the last train_critic's, logged by the train call that follows it

    # --- the critic ---------------------------------------------------------------------------------

    def train_critic(self, on_batch: EpisodeBatch, off_batch: EpisodeBatch, t_env: int) -> None:
        """The critic's steps on an on-policy and an off-policy sample together, forwards in time."""
        data = concat_samples(self._critic_data(on_batch, tree_backup=False),
                              self._critic_data(off_batch, tree_backup=True))
        stats = {key: [] for key in CRITIC_STATS}
        for t in range(data.mask.shape[1]):
            mask_t = data.mask[:, t]  # [bs, 1]
            if mask_t.sum() < 0.5:
                continue
            q_t = self.critic(data.inputs[:, t])  # [bs, n_agents, n_actions]
            q_tot = self.mixer(taken(q_t, data.actions[:, t]).unsqueeze(1), data.states[:, t:t + 1])[:, 0]  # [bs, 1]
            masked_td_error = (q_tot - data.targets[:, t]) * mask_t
            loss = masked_td_error.pow(2).sum() / mask_t.sum()
            grad_norm = self._optimise((self.critic_optimiser, self.mixer_optimiser), self.critic_params, loss,
                                       t_env)
            self.critic_training_steps += 1
            self._critic_step_stats(stats, loss, grad_norm, masked_td_error, q_tot, q_t.detach(), data.targets[:, t],
                                    mask_t)
        self._refresh_targets(self.critic_training_steps)
        self.critic_stats = stats

    def _critic_data(self, batch: EpisodeBatch, tree_backup: bool) -> CriticData:
        """A sample's inputs and targets: TD(lambda) returns, or with `tree_backup` DOP's tree-backup returns."""
        data = batch_transitions(batch)
        inputs = self.critic.build_inputs(batch)  # [bs, T, n_agents, input]
        actions = batch["actions"].long()  # [bs, T, n_agents, 1]
        states = batch["state"]  # [bs, T, state]
        with th.no_grad():
            target_q = self.target_critic(inputs)  # [bs, T, n_agents, n_actions]
            q_taken = self.target_mixer(taken(target_q, actions), states)  # [bs, T, 1]
            if tree_backup:
                policies = renormalise_available(self._policies(batch), batch["avail_actions"])
                pi_taken = taken(policies, actions).prod(dim=-1, keepdim=True)  # joint probability [bs, T, 1]
                expected_q = self.target_mixer((policies * target_q).sum(-1), states)  # [bs, T, 1]
                targets = build_tree_backup_targets(data.rewards, data.terminated, data.mask, q_taken, expected_q,
                                                    pi_taken, self.args.gamma, self.args.tb_lambda, self.args.step)
            else:
                targets = build_td_lambda_targets(data.rewards, data.terminated, data.mask, q_taken, self.n_agents,
                                                  self.args.gamma, self.args.td_lambda)
        return CriticData(inputs[:, :-1], data.actions, states[:, :-1], data.mask, targets)

    def _critic_step_stats(self, stats: dict, loss: th.Tensor, grad_norm: th.Tensor, masked_td_error: th.Tensor,
                           q_tot: th.Tensor, q_t: th.Tensor, targets: th.Tensor, mask_t: th.Tensor) -> None:
        """Appends one critic step's stats; q_t [bs, n_agents, n_actions], the others [bs, 1]."""
        n_valid = mask_t.sum()
        q_max, q_min = q_t.max(dim=-1)[0], q_t.min(dim=-1)[0]  # [bs, n_agents]
        step = {"critic_loss": loss, "critic_grad_norm": grad_norm,
                "td_error_abs": masked_td_error.abs().sum() / n_valid,
                "q_taken_mean": (q_tot * mask_t).sum() / n_valid, "target_mean": (targets * mask_t).sum() / n_valid,
                "q_max_mean": (q_max.mean(-1, keepdim=True) * mask_t).sum() / n_valid,
                "q_min_mean": (q_min.mean(-1, keepdim=True) * mask_t).sum() / n_valid,
                "q_max_var": (q_max.var(-1, keepdim=True) * mask_t).sum() / n_valid,
                "q_min_var": (q_min.var(-1, keepdim=True) * mask_t).sum() / n_valid}
        if not stats["critic_loss"]:  # the first trained step
            stats["q_max_first"], stats["q_min_first"] = step["q_max_mean"].item(), step["q_min_mean"].item()
        for key in CRITIC_STATS:
            stats[key].append(step[key].item())

    # --- the actors ---------------------------------------------------------------------------------

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int, per_weight: th.Tensor | None = None) -> dict:
        """One actor step on the batch (the newest episodes); per_weight (prioritized replay) is refused at
        construction."""
        data = batch_transitions(batch)
        with th.no_grad():
            q_values = self.critic(self.critic.build_inputs(batch)[:, :-1])  # [bs, T-1, n_agents, n_actions]
            credit = self.mixer.k(batch["state"][:, :-1])  # [bs, T-1, n_agents]
        policies = self._policies(batch)[:, :-1]  # [bs, T-1, n_agents, n_actions]
        policies = renormalise_available(policies, batch["avail_actions"][:, :-1])
        advantages = counterfactual_advantages(policies, q_values, data.actions)  # [bs, T-1, n_agents]
        # Padded steps have no available action: their (zero) probability is replaced before the log.
        pi_taken = taken(policies, data.actions).masked_fill(data.mask.expand_as(advantages) == 0, 1.0)
        coma_loss = -masked_mean(credit * advantages * th.log(pi_taken), data.mask)
        grad_norm = self._optimise(self.agent_optimiser, self.agent_params, coma_loss, t_env)
        if self._logging(t_env):
            critic = {key: (sum(values) / len(values) if isinstance(values, list) else values)
                      for key, values in self.critic_stats.items() if values != []}
            self._log({**critic, "coma_loss": coma_loss.detach(), "agent_grad_norm": grad_norm,
                       "pi_max": masked_mean(policies.detach().max(dim=-1)[0], data.mask)}, t_env)
        return {}
