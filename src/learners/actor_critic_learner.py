"""EPyMARL's actor-critic learners: ``actor_critic_learner`` for IA2C (critic_type ac_critic) and MAA2C
(cv_critic), as EPyMARL's actor_critic_learner.py computes them, and ``epymarl_ppo_learner`` (PPOLearner,
below) for MAPPO and EPyMARL's IPPO, as its ppo_learner.py does.

One train call on a batch (T stored steps, T-1 transitions; agents a = 1..n, one team reward r_t):

1. With standardise_rewards the rewards are standardised by their running mean and variance (updated
   with this batch first); every agent gets the team's, or with common_reward=False its own (each
   agent's rewards then have their own statistics).
2. Critic, one Adam step (lr, as EPyMARL's one learning rate) on the state values V_i(t) of
   modules/critics/state_value.py against n-step returns (q_nstep) of the target critic's values V':

       G_t = sum_{k<q_nstep} gamma^k r_{t+k} m_{t+k} + gamma^q_nstep V'(t+q_nstep) m_{t+q_nstep}
       loss = sum over valid (t, i) of (G_t - V_i(t))^2 / their number

   where the return stops at the last transition; there, with add_value_last_step (EPyMARL's default),
   it adds gamma^(k+1) V' of the last stored step, unmasked (also after a terminal step, as EPyMARL).
   With standardise_returns the target values are de-standardised, and the returns standardised, by the
   returns' running statistics.
3. Actor, one Adam step (lr) with the advantages A = G - V (masked, no gradient):

       loss = -sum over valid (t, i) of (A log(pi(u) + 1e-10) + entropy_coef H(pi)) / their number

   with H(pi) = -sum_a pi(a) log(pi(a) + 1e-10) (EPyMARL's 1e-10 keeps log finite).
4. The target critic follows target_update_interval_or_tau: above 1 a copy every that many critic
   steps, else a soft update target = (1 - tau) target + tau critic after every step.

Stats under EPyMARL's names: critic_loss, critic_grad_norm, td_error_abs, q_taken_mean, target_mean,
advantage_mean, pg_loss, agent_grad_norm, pi_max.
"""
from types import SimpleNamespace

import torch as th

from components.episode_buffer import EpisodeBatch
from modules.critics import REGISTRY as critic_REGISTRY
from utils.th_utils import follow_targets

from .coma_learner import counterfactual_advantages
from .policy_learner import PolicyLearner, masked_mean, taken
from .ppo_learner import clipped_surrogate_loss
from .standardised import StandardisedLearner

LOG_EPS = 1e-10  # EPyMARL's: log(p + LOG_EPS)


def nstep_returns(rewards: th.Tensor, mask: th.Tensor, values: th.Tensor, nsteps: int, gamma: float,
                  add_value_last_step: bool) -> th.Tensor:
    """EPyMARL's n-step returns: rewards and mask [bs, T-1, n], values [bs, T, n] -> [bs, T-1, n].

    G_t = sum over k < nsteps with t + k < T-1 of gamma^k r_{t+k} m_{t+k}, plus gamma^nsteps V_{t+nsteps}
    m_{t+nsteps} where t + nsteps < T-1, or else (add_value_last_step) gamma^(T-1-t) V_{T-1}, the value of
    the last stored step, unmasked (as EPyMARL's loop adds it)."""
    transitions = rewards.shape[1]
    steps = th.arange(transitions, device=rewards.device)
    ahead = steps[None, :] - steps[:, None]  # [T-1 (t), T-1 (s)]: s - t
    discounts = th.pow(gamma, ahead.clamp(min=0).to(rewards.dtype))
    weights = th.where((ahead >= 0) & (ahead < nsteps), discounts, th.zeros_like(discounts))  # [T-1, T-1]
    returns = th.einsum("ts,bsn->btn", weights, rewards * mask)  # [bs, T-1, n]
    bootstrapped = max(transitions - nsteps, 0)  # the steps t whose n-step horizon ends inside the episode
    returns[:, :bootstrapped] += gamma ** nsteps * values[:, nsteps:transitions] * mask[:, nsteps:]
    if add_value_last_step:
        remaining = (transitions - steps[bootstrapped:]).to(rewards.dtype)  # [T-1 - bootstrapped]
        returns[:, bootstrapped:] += th.pow(gamma, remaining)[None, :, None] * values[:, transitions:transitions + 1]
    return returns


def _log_pi_and_entropy(policies: th.Tensor, actions: th.Tensor, mask: th.Tensor, log_eps: float = LOG_EPS) -> tuple:
    """EPyMARL's log pi(u) + log_eps of the actions taken and the policies' entropy [bs, T-1, n], and the
    policies with padded steps at 1 (log 1 = 0): policies [bs, T-1, n, n_actions], actions [bs, T-1, n, 1]."""
    policies = policies.masked_fill((mask == 0).unsqueeze(-1), 1.0)
    log_pi_taken = th.log(taken(policies, actions) + log_eps)  # [bs, T-1, n]
    entropy = -(policies * th.log(policies + LOG_EPS)).sum(-1)  # [bs, T-1, n]
    return log_pi_taken, entropy, policies


def policy_gradient_loss(policies: th.Tensor, advantages: th.Tensor, actions: th.Tensor, mask: th.Tensor,
                         entropy_coef: float, log_eps: float = LOG_EPS) -> tuple[th.Tensor, th.Tensor]:
    """(loss, the policies with padded steps at 1) of EPyMARL's actor: policies [bs, T-1, n, n_actions],
    advantages and mask [bs, T-1, n], actions [bs, T-1, n, 1]; log(pi(u) + log_eps) (its COMA: no eps)."""
    log_pi_taken, entropy, policies = _log_pi_and_entropy(policies, actions, mask, log_eps)
    loss = -((advantages * log_pi_taken + entropy_coef * entropy) * mask).sum() / mask.sum()
    return loss, policies


def clipped_policy_loss(policies: th.Tensor, old_log_pi_taken: th.Tensor, advantages: th.Tensor,
                        actions: th.Tensor, mask: th.Tensor, eps_clip: float,
                        entropy_coef: float) -> tuple[th.Tensor, th.Tensor]:
    """(loss, the policies with padded steps at 1) of EPyMARL's PPO actor: PPO's clipped surrogate
    (ppo_learner.clipped_surrogate_loss) with rho = pi(u) / pi_old(u), minus the entropy bonus; shapes as
    policy_gradient_loss, old_log_pi_taken [bs, T-1, n]."""
    log_pi_taken, entropy, policies = _log_pi_and_entropy(policies, actions, mask)
    loss = clipped_surrogate_loss(log_pi_taken, old_log_pi_taken, advantages, eps_clip, mask) \
        - entropy_coef * masked_mean(entropy, mask)
    return loss, policies


class ActorCriticLearner(StandardisedLearner, PolicyLearner):
    """Trains ``mac`` (a policy: agent_output_type pi_logits) and the state-value critic critic_type."""

    COUNTERS = ("log_stats_t", "critic_training_steps", "last_target_update_step")
    CRITIC_TYPES = ("ac_critic", "cv_critic", "ac_critic_ns", "cv_critic_ns")
    ACTOR_LOSS_STAT = "pg_loss"  # the actor loss's name in the logs (EPyMARL's COMA: coma_loss)

    def __init__(self, mac, scheme: dict, logger, args: SimpleNamespace):
        super().__init__(mac, logger, args)
        if args.critic_type not in self.CRITIC_TYPES:
            raise ValueError(f"critic_type={args.critic_type!r}: {args.learner} takes {', '.join(self.CRITIC_TYPES)}")
        self._add_critic(critic_REGISTRY[args.critic_type](scheme, args), critic_lr=args.lr,
                         trained_with=self._trained_with_critic(scheme, args))
        self._init_standardisation(args, (self.n_agents,))

    def _trained_with_critic(self, scheme: dict, args: SimpleNamespace) -> th.nn.Module | None:
        """A network the critic's Adam step also trains (PAC's state value); none here."""
        return None

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int, per_weight: th.Tensor | None = None) -> dict:
        """One critic step, then one actor step; per_weight (prioritized replay) is refused at construction."""
        prepared = self._prepare(batch, t_env)
        if prepared is None:
            return {}
        data, rewards, mask = prepared
        policies = self._policies(batch)[:, :-1]  # [bs, T-1, n, n_actions]
        advantages, critic_stats = self._critic_step(batch, rewards, mask, t_env)  # [bs, T-1, n]
        loss, policies = policy_gradient_loss(policies, advantages, data.actions, mask, self._entropy_coef(t_env))
        grad_norm = self._optimise(self.agent_optimiser, self.agent_params, loss, t_env)
        self._finish(t_env, mask, critic_stats, advantages, loss, grad_norm, policies)
        return {}

    def _critic_step(self, batch: EpisodeBatch, rewards: th.Tensor, mask: th.Tensor,
                     t_env: int) -> tuple[th.Tensor, dict]:
        """The critic's step of a train call: the advantages [bs, T-1, n] (no gradient) and its stats."""
        return self._train_critic(self._critic_data(batch), rewards, mask, t_env)

    def _entropy_coef(self, t_env: int) -> float:
        """The actor loss's entropy coefficient at t_env (entropy_coef)."""
        return self.args.entropy_coef

    def _finish(self, t_env: int, mask: th.Tensor, critic_stats: dict, advantages: th.Tensor, loss: th.Tensor,
                grad_norm: th.Tensor, policies: th.Tensor) -> None:
        """After the train call's steps: the target critic's update and the stats of the last steps."""
        self.critic_training_steps += 1
        self._update_target_critic()
        if self._logging(t_env):
            self._log({**critic_stats, "advantage_mean": masked_mean(advantages, mask),
                       self.ACTOR_LOSS_STAT: loss.detach(), "agent_grad_norm": grad_norm,
                       "pi_max": masked_mean(policies.detach().max(dim=-1)[0], mask)}, t_env)

    def _critic_data(self, batch: EpisodeBatch) -> tuple[th.Tensor, th.Tensor]:
        """The critic's inputs [bs, T, n, input] and the target critic's values of them [bs, T, n] (no
        gradient; as the network gives them, before any de-standardisation)."""
        inputs = self.critic.build_inputs(batch)
        with th.no_grad():
            return inputs, self.target_critic(inputs)[..., 0]

    def _train_critic(self, critic_data: tuple[th.Tensor, th.Tensor], rewards: th.Tensor, mask: th.Tensor,
                      t_env: int) -> tuple[th.Tensor, dict]:
        """One critic step on _critic_data's inputs and target values; the masked advantages G - V
        [bs, T-1, n] (no gradient) and the step's stats."""
        inputs, target_values = critic_data
        target_values = self.standardisation.values(target_values)  # [bs, T, n]
        returns = nstep_returns(rewards, mask, target_values, self.args.q_nstep, self.args.gamma,
                                self.args.add_value_last_step)  # [bs, T-1, n]
        returns = self.standardisation.returns(returns)
        values = self.critic(inputs)[:, :-1, :, 0]  # [bs, T-1, n]
        masked_td_error = (returns - values) * mask
        loss = masked_mean(masked_td_error.pow(2), mask)
        grad_norm = self._optimise(self.critic_optimiser, self.critic_params, loss, t_env)
        stats = {"critic_loss": loss.detach(), "critic_grad_norm": grad_norm,
                 "td_error_abs": masked_mean(masked_td_error.detach().abs(), mask),
                 "q_taken_mean": masked_mean(values.detach(), mask), "target_mean": masked_mean(returns, mask)}
        return masked_td_error.detach(), stats

    def _update_target_critic(self) -> None:
        self.last_target_update_step = follow_targets(
            self.args.target_update_interval_or_tau, self.critic_training_steps, self.last_target_update_step,
            lambda: self.target_critic.load_state_dict(self.critic.state_dict()), [(self.target_critic, self.critic)])


class PPOLearner(ActorCriticLearner):
    """EPyMARL's PPO learner (``learner: epymarl_ppo_learner``: MAPPO with cv_critic, EPyMARL's IPPO
    with ac_critic). Per train call, `epochs` times: one critic step as actor_critic_learner's (so the
    advantages come from the critic as it is at that epoch), then one actor step on the clipped
    surrogate (clipped_policy_loss) against the policy the batch was collected with. That policy is the
    controller as the call starts (EPyMARL keeps a copy, old_mac, equal to it then); the target critic
    is updated once per call (so its values are computed once, where EPyMARL recomputes them each epoch),
    and the stats are those of the last epoch."""

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int, per_weight: th.Tensor | None = None) -> dict:
        prepared = self._prepare(batch, t_env)
        if prepared is None:
            return {}
        data, rewards, mask = prepared
        actions = data.actions  # [bs, T-1, n, 1]
        inputs = self.mac.build_sequence_inputs(batch)  # [bs, T, n, input]: built once for every epoch
        with th.no_grad():
            old_policies = self._policies(batch, inputs)[:, :-1].masked_fill((mask == 0).unsqueeze(-1), 1.0)
            old_log_pi_taken = th.log(taken(old_policies, actions) + LOG_EPS)  # [bs, T-1, n]
        critic_data = self._critic_data(batch)  # the target critic does not change within the call
        for _ in range(self.args.epochs):
            policies = self._policies(batch, inputs)[:, :-1]  # [bs, T-1, n, n_actions]
            advantages, critic_stats = self._train_critic(critic_data, rewards, mask, t_env)  # [bs, T-1, n]
            loss, policies = clipped_policy_loss(policies, old_log_pi_taken, advantages, actions, mask,
                                                 self.args.eps_clip, self.args.entropy_coef)
            grad_norm = self._optimise(self.agent_optimiser, self.agent_params, loss, t_env)
        self._finish(t_env, mask, critic_stats, advantages, loss, grad_norm, policies)
        return {}


class EPyMARLCOMALearner(ActorCriticLearner):
    """EPyMARL's COMA (``learner: epymarl_coma_learner``; configs coma_epymarl and coma_ns), as its
    coma_learner.py computes it; PyMARL2's COMA (``coma_learner``, config coma) trains its critic otherwise.
    One train call on a batch (one team reward r, standardised with standardise_rewards):

    1. Critic Q_i(s, u_{-i}, .) (critic_type coma_critic / coma_critic_ns), one Adam step (lr): targets are
       q_nstep-step returns (nstep_returns, add_value_last_step) of the target critic's Q of the actions
       taken, the loss the squared errors of Q_i(s_t, u_t) summed over the agents and divided by the valid
       steps (EPyMARL's sum over agents).
    2. Actor, one Adam step (lr): COMA's counterfactual advantages A_i = Q_i(s, u) - sum_a pi_i(a) Q_i(s,
       (u_{-i}, a)) from the critic before its step, in actor_critic_learner's loss with log pi(u) (no 1e-10,
       as EPyMARL's COMA) and entropy_coef.
    3. The target critic follows target_update_interval_or_tau.

    Stats under EPyMARL's names (coma_loss for the actor's loss); td_error_abs, q_taken_mean and target_mean are
    means over valid (step, agent) (EPyMARL's are n_agents times these)."""

    CRITIC_TYPES = ("coma_critic", "coma_critic_ns")
    ACTOR_LOSS_STAT = "coma_loss"

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int, per_weight: th.Tensor | None = None) -> dict:
        prepared = self._prepare(batch, t_env)
        if prepared is None:
            return {}
        data, rewards, mask = prepared
        q_values, critic_stats = self._train_q_critic(batch, data.actions, rewards, mask, t_env)  # [bs, T-1, n, A]
        policies = self._policies(batch)[:, :-1]  # [bs, T-1, n, n_actions]
        advantages = counterfactual_advantages(policies, q_values, data.actions)  # [bs, T-1, n]
        loss, policies = policy_gradient_loss(policies, advantages, data.actions, mask, self.args.entropy_coef,
                                              log_eps=0.0)
        grad_norm = self._optimise(self.agent_optimiser, self.agent_params, loss, t_env)
        self._finish(t_env, mask, critic_stats, advantages, loss, grad_norm, policies)
        return {}

    def _train_q_critic(self, batch: EpisodeBatch, actions: th.Tensor, rewards: th.Tensor, mask: th.Tensor,
                        t_env: int) -> tuple[th.Tensor, dict]:
        """One critic step; the critic's Q-values before it [bs, T-1, n, n_actions] (no gradient) and stats.
        actions [bs, T-1, n, 1]."""
        inputs = self.critic.build_inputs(batch)  # [bs, T, n, input]
        all_actions = batch["actions"].long()  # [bs, T, n, 1]
        with th.no_grad():
            target_taken = taken(self.target_critic(inputs), all_actions)  # [bs, T, n]
        target_taken = self.standardisation.values(target_taken)
        returns = nstep_returns(rewards, mask, target_taken, self.args.q_nstep, self.args.gamma,
                                self.args.add_value_last_step)  # [bs, T-1, n]
        returns = self.standardisation.returns(returns)
        q_values = self.critic(inputs)[:, :-1]  # [bs, T-1, n, n_actions]
        q_taken = taken(q_values, actions)  # [bs, T-1, n]
        masked_td_error = (returns - q_taken) * mask
        loss = masked_td_error.pow(2).sum() / mask[..., 0].sum()
        grad_norm = self._optimise(self.critic_optimiser, self.critic_params, loss, t_env)
        stats = {"critic_loss": loss.detach(), "critic_grad_norm": grad_norm,
                 "td_error_abs": masked_mean(masked_td_error.detach().abs(), mask),
                 "q_taken_mean": masked_mean(q_taken.detach(), mask), "target_mean": masked_mean(returns, mask)}
        return q_values.detach(), stats
