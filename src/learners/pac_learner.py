"""EPyMARL's Pareto Actor-Critic (``learner: pac_learner``; configs ``pac_ns`` and marlkit's shared ``pac``),
as EPyMARL's actor_critic_pac_learner.py computes it: each agent's critic Q_i(s, u_{-i}, u_i)
(modules/critics/pac.py) is trained on the actions taken, but the advantages and targets assume the
other agents act best for agent i's action: max over u_{-i}.

One train call (T stored steps, T-1 transitions, agents i, valid-step mask m):

1. Targets, from the target critic at the same step (SARSA-like, EPyMARL's pac "sarsa"):
       Q'_i,t = max over u_{-i} of Q'_i(s_t, u_{-i}, u_i,t)   (u_i,t: the action agent i took)
       G_i,t  = sum_{k<q_nstep} gamma^k r_{t+k} m_{t+k} + gamma^q_nstep Q'_i,t+q_nstep m_{t+q_nstep}
   (the return stops at the last transition; no value is added after it).
2. Critic and state value, one Adam step (lr) over both (one optimiser, one clipped gradient):
       loss = mean over valid (t, i) of (G - Q_i(s_t, u_{-i,t}, u_i,t))^2 + mean over valid of (G - V_i(s_t))^2
   with V the state-value network state_value_type (cv_critic_ns: the state, per agent).
3. Actor, one Adam step (lr): actor_critic_learner's policy-gradient loss with the advantages
       A_i,t = max over u_{-i} Q_i(s_t, u_{-i}, u_i,t) - V_i(s_t)   (the critic before its step; no gradient)
   and an entropy coefficient annealed linearly from initial_entropy_coef to final_entropy_coef over the
   first entropy_end_ratio * t_max env steps.
4. The target critic follows target_update_interval_or_tau in critic steps (actor_critic_learner).

Stats: actor_critic_learner's (critic_loss is the sum of both losses) and entropy_coef.
Difference from EPyMARL: its PAC learner standardises the returns when standardise_rewards is set (and
never the rewards); here standardise_rewards standardises the rewards and standardise_returns the returns,
as in the other learners (both are off in the presets).
"""
from types import SimpleNamespace

import torch as th
from torch.optim import Adam

from components.episode_buffer import EpisodeBatch
from modules.critics import REGISTRY as critic_REGISTRY
from modules.critics.pac import taken_others

from .actor_critic_learner import ActorCriticLearner, nstep_returns
from .policy_learner import masked_mean, taken

STATE_VALUE_TYPES = ("cv_critic", "cv_critic_ns")


class PACLearner(ActorCriticLearner):
    """Trains ``mac`` (policies), the PAC critic critic_type and the state value state_value_type."""

    CRITIC_TYPES = ("pac_critic", "pac_critic_ns")

    def __init__(self, mac, scheme: dict, logger, args: SimpleNamespace):
        if args.state_value_type not in STATE_VALUE_TYPES:
            raise ValueError(f"state_value_type={args.state_value_type!r}: {args.learner} takes "
                             f"{', '.join(STATE_VALUE_TYPES)}")
        super().__init__(mac, scheme, logger, args)
        self.networks["state_value.th"] = self.state_value
        if args.standardise_rewards:
            logger.console_logger.warning(f"{args.learner}: standardise_rewards=True standardises the rewards here; "
                                          f"EPyMARL's standardised the returns under this key")

    def _trained_with_critic(self, scheme: dict, args: SimpleNamespace) -> th.nn.Module | None:
        """The state value state_value_type, which PAC trains in the critic's Adam step (one clipped gradient)."""
        self.state_value = critic_REGISTRY[args.state_value_type](scheme, args)
        return self.state_value

    def _entropy_coef(self, t_env: int) -> float:
        """initial_entropy_coef, annealed linearly to final_entropy_coef at entropy_end_ratio * t_max env steps."""
        end = self.args.t_max * self.args.entropy_end_ratio
        progress = min(1.0, t_env / end) if end > 0 else 1.0  # entropy_end_ratio 0: the final coefficient
        return progress * self.args.final_entropy_coef + (1.0 - progress) * self.args.initial_entropy_coef

    def _critic_step(self, batch: EpisodeBatch, rewards: th.Tensor, mask: th.Tensor,
                     t_env: int) -> tuple[th.Tensor, dict]:
        """PAC's critic and state-value step; its stats include the entropy coefficient the actor step uses."""
        advantages, stats = self._train_critic_and_value(batch, rewards, mask, t_env)
        return advantages, {**stats, "entropy_coef": self._entropy_coef(t_env)}

    def _train_critic_and_value(self, batch: EpisodeBatch, rewards: th.Tensor, mask: th.Tensor,
                                t_env: int) -> tuple[th.Tensor, dict]:
        """One step of the critic and the state value; the advantages [bs, T-1, n] (no gradient) and stats."""
        actions = batch["actions"][:, :-1].long()  # [bs, T-1, n, 1]
        inputs = self.critic.build_inputs(batch)[:, :-1]  # [bs, T-1, n, input]
        with th.no_grad():
            target_best = taken(self.target_critic.max_over_others(inputs), actions)  # [bs, T-1, n]
            target_best = self.standardisation.values(target_best)
            best = taken(self.critic.max_over_others(inputs), actions)  # the critic before its step
        returns = self.standardisation.returns(self._nstep_targets(rewards, mask, target_best))  # [bs, T-1, n]
        q_taken = taken(self.critic(inputs, taken_others(batch, self.n_actions)[:, :-1]), actions)  # [bs, T-1, n]
        state_values = self.state_value(self.state_value.build_inputs(batch))[:, :-1, :, 0]  # [bs, T-1, n]
        masked_td_error = (returns - q_taken) * mask
        loss = masked_mean(masked_td_error.pow(2), mask) + masked_mean((returns - state_values).pow(2), mask)
        grad_norm = self._optimise(self.critic_optimiser, self.critic_params, loss, t_env)
        stats = {"critic_loss": loss.detach(), "critic_grad_norm": grad_norm,
                 "td_error_abs": masked_mean(masked_td_error.detach().abs(), mask),
                 "q_taken_mean": masked_mean(q_taken.detach(), mask), "target_mean": masked_mean(returns, mask)}
        return (best - state_values.detach()) * mask, stats

    def _nstep_targets(self, rewards: th.Tensor, mask: th.Tensor, values: th.Tensor) -> th.Tensor:
        """q_nstep-step returns [bs, T-1, n] bootstrapped from the values of the transitions [bs, T-1, n]; the
        return stops at the last transition (no value added after it)."""
        # a zero value after the last transition, which add_value_last_step=False never reads
        values_after = th.cat([values, th.zeros_like(values[:, :1])], dim=1)  # [bs, T, n]
        return nstep_returns(rewards, mask, values_after, self.args.q_nstep, self.args.gamma, False)


class PACDCGLearner(PACLearner):
    """EPyMARL's PAC-DCG (``learner: pac_dcg_learner``; configs pac_dcg_ns and marlkit's shared pac_dcg), as
    its actor_critic_pac_dcg_learner.py computes it: PAC with a deep coordination graph as the critic
    (modules/critics/dcg.py: one joint Q(s, u) for the team), and "the others' best joint action" taken as
    the graph's greedy joint action (message passing) rather than enumerated. One train call:

    1. Targets, from the target critic: for each agent i, its action taken put into the target critic's
       greedy joint action g', G_i,t = q_nstep-step return (as PAC) bootstrapped from Q'(s_t, g'_{-i,t}, u_i,t).
    2. Critic, one Adam step (lr, its own clipped gradient): loss = sum over agents i of the mean over valid
       steps t of (G_i,t - Q(s_t, u_t))^2 (EPyMARL's sum over agents).
    3. State value V_i(s) (state_value_type), one Adam step of its own: mean over valid (t, i) of
       (G^V_i,t - V_i(s_t))^2, G^V the q_nstep-step return bootstrapped from V itself (no gradient).
    4. Actor, PAC's step with A_i,t = Q(s_t, g_{-i,t}, u_i,t) - V_i(s_t), g the critic's greedy joint action
       (the critic before its step; no gradient).

    Stats as PAC's, under EPyMARL's names; td_error_abs, q_taken_mean and target_mean are means over valid
    (t, i) (EPyMARL divides their sums over agents by the valid steps only: n times these), critic_loss the
    loss trained. standardise_returns is refused (EPyMARL standardised V's and Q's returns apart, under
    standardise_rewards); standardise_rewards standardises the rewards, as with PAC.
    """

    CRITIC_TYPES = ("pac_dcg_critic", "pac_dcg_critic_ns")

    def __init__(self, mac, scheme: dict, logger, args: SimpleNamespace):
        if args.standardise_returns:
            raise ValueError("pac_dcg_learner: standardise_returns=True is not offered (the critic's and the state "
                             "value's returns would need statistics of their own); set standardise_returns=False")
        super().__init__(mac, scheme, logger, args)
        self.optimisers["state_value_opt.th"] = self.state_value_optimiser

    def _trained_with_critic(self, scheme: dict, args: SimpleNamespace) -> None:
        """PAC-DCG trains the state value with an Adam of its own (its own clipped gradient), not the critic's."""
        self.state_value = critic_REGISTRY[args.state_value_type](scheme, args)
        self.state_value_params = list(self.state_value.parameters())
        self.state_value_optimiser = Adam(params=self.state_value_params, lr=args.lr)
        return None

    def _train_critic_and_value(self, batch: EpisodeBatch, rewards: th.Tensor, mask: th.Tensor,
                                t_env: int) -> tuple[th.Tensor, dict]:
        """One step of the graph critic and one of the state value; the advantages [bs, T-1, n] and stats."""
        actions = batch["actions"][:, :-1, :, 0].long()  # [bs, T-1, n]
        available = batch["avail_actions"][:, :-1]  # [bs, T-1, n, n_actions]
        inputs = self.critic.build_inputs(batch)[:, :-1]  # [bs, T-1, n, input]
        utilities, payoffs = self.critic(inputs)  # [bs, T-1, n, n_actions], [bs, T-1, E, n_actions, n_actions]
        with th.no_grad():
            target_best = self.target_critic.best_responses(*self.target_critic(inputs), available, actions)
            best = self.critic.best_responses(utilities.detach(), payoffs.detach(), available, actions)  # [bs, T-1, n]
        returns = self._nstep_targets(rewards, mask, target_best)  # [bs, T-1, n]
        q_taken = self.critic.q_values(utilities, payoffs, actions.unsqueeze(-2))  # [bs, T-1, 1]
        state_values = self.state_value(self.state_value.build_inputs(batch))[:, :-1, :, 0]  # [bs, T-1, n]
        value_returns = self._nstep_targets(rewards, mask, state_values.detach())  # [bs, T-1, n]
        masked_td_error = (returns - q_taken) * mask  # [bs, T-1, n]
        loss = masked_td_error.pow(2).sum() / mask[..., 0].sum()
        value_loss = masked_mean((value_returns - state_values).pow(2), mask)
        self._optimise(self.state_value_optimiser, self.state_value_params, value_loss, t_env)
        grad_norm = self._optimise(self.critic_optimiser, self.critic_params, loss, t_env)
        stats = {"critic_loss": loss.detach(), "critic_grad_norm": grad_norm,
                 "td_error_abs": masked_mean(masked_td_error.detach().abs(), mask),
                 "q_taken_mean": masked_mean(q_taken.detach().expand_as(mask), mask),
                 "target_mean": masked_mean(returns, mask)}
        return (best - state_values.detach()) * mask, stats
