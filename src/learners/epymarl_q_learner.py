"""EPyMARL's Q-learner (``learner: epymarl_q_learner``): the learner of EPyMARL's iql, vdn and qmix presets
(``iql_epymarl``, ``vdn_epymarl``, ``qmix_epymarl``) and their non-shared variants (``iql_ns``, ``vdn_ns``,
``qmix_ns``), with the arithmetic of EPyMARL's q_learner.py. PyMARL2's presets of the same algorithms
keep their own learners (``iql``, ``vdn``: q_learner; ``qmix``: nq_learner).

It is PyMARL2's one-step QLearner (q_learner.py, which holds the unroll, the double-Q target and the
mixers; ``qmix`` is PyMARL's original mixer there, as in EPyMARL) with EPyMARL's differences:

    r'_t = (r_t - mean_r) / std_r          with standardise_rewards (running statistics, utils/running_stats.py)
    y_t  = r'_t + gamma * (1 - d_t) * Q'_tot(s_{t+1}, a*_{t+1})
    loss = sum over valid steps of (Q_tot(s_t, a_t) - y_t)^2 / number of valid steps     (no 1/2)

- with standardise_returns, Q' is de-standardised before it joins the rewards and y standardised after.
  The returns' statistics see every entry, padded steps included, as EPyMARL's; but where EPyMARL's double-Q
  target reads its -9999999 placeholder at padded steps (every action unavailable there) and feeds it to
  the statistics, which then overflow within a few batches, here the target network's own value is used
  (its loss is masked out either way);
- the targets follow target_update_interval_or_tau counted in training steps (a copy every that many
  steps above 1, else a soft update with tau after every step), not target_update_interval episodes;
- without a mixer (IQL) each agent may learn from its own reward (common_reward=False): rewards and
  targets are then [bs, T-1, n_agents];
- the loss is logged as ``loss`` (EPyMARL's name; PyMARL2's q_learner logs ``loss_td``). Where EPyMARL's
  q_taken_mean and target_mean of IQL divide by the number of agents once more, these are the agents'
  mean (as with a mixer, Q_tot / n_agents).

The optimiser is the YAML's (``optimizer: adam`` in the presets, EPyMARL's Adam with lr and its default eps).
"""
from types import SimpleNamespace

import torch as th

from components.episode_buffer import EpisodeBatch
from utils.th_utils import follow_targets

from .q_learner import QLearner, Transitions
from .standardised import StandardisedLearner


class EPyMARLQLearner(StandardisedLearner, QLearner):
    """Trains ``mac`` and the mixer ``args.mixer`` (vdn, qmix, or None for independent learners)."""

    MIXERS = ("qmix", "vdn")
    LOSS_STAT = "loss"
    HALF_SQUARED_ERROR = False

    def __init__(self, mac, scheme: dict, logger, args: SimpleNamespace):
        if not args.common_reward and args.mixer is not None:
            raise ValueError(f"common_reward=False (a reward per agent): the {args.mixer} mixer learns one team "
                             f"value from one team reward; use mixer=None (iql_epymarl, iql_ns) or common_reward=True")
        super().__init__(mac, scheme, logger, args)
        return_shape = (1,) if self.mixer is not None else (args.n_agents,)  # Q_tot's, or each agent's
        self._init_standardisation(args, return_shape)
        self.training_steps = 0
        self.last_target_update_step = 0

    def _transitions(self, batch: EpisodeBatch) -> Transitions:
        """The batch's transitions with the rewards standardised (standardise_rewards): [bs, T-1, 1], or
        [bs, T-1, n_agents] with common_reward=False."""
        data = super()._transitions(batch)
        return data._replace(rewards=self.standardisation.rewards(data.rewards))

    def _mix_target(self, agent_qs: th.Tensor, states: th.Tensor) -> th.Tensor:
        """The (mixed) greedy target Q-values [bs, T-1, k], on the returns' scale (standardise_returns)."""
        return self.standardisation.values(super()._mix_target(agent_qs, states))

    def _targets(self, batch: EpisodeBatch, mac_out: th.Tensor, target_mac_out: th.Tensor,
                 data: Transitions) -> th.Tensor:
        """One-step targets [bs, T-1, k] (k: 1 with a mixer, n_agents without), standardised by the
        returns' running statistics with standardise_returns."""
        return self.standardisation.returns(super()._targets(batch, mac_out, target_mac_out, data))

    def _follow_targets(self, episode_num: int) -> None:
        self.training_steps += 1
        pairs = [(self.target_mac.agent, self.mac.agent)]
        if self.mixer is not None:
            pairs.append((self.target_mixer, self.mixer))
        self.last_target_update_step = follow_targets(self.args.target_update_interval_or_tau, self.training_steps,
                                                      self.last_target_update_step, self._update_targets, pairs)

    def state_dict(self) -> dict:
        """The counters and the running reward / return statistics."""
        return {**super().state_dict(), "training_steps": self.training_steps,
                "last_target_update_step": self.last_target_update_step}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.training_steps = state["training_steps"]
        self.last_target_update_step = state["last_target_update_step"]
