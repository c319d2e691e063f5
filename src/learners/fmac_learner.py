"""PyMARL2's RIIT learner (``learner: fmac_learner``), for riit (run on_off) and riit_online (run default).

Each agent's critic Q_i(o_i, id, a_i) (FMACCritic) takes a distribution over the agent's actions; QMIX
(PyMARL's original mixer) mixes the Q_i into Q_tot(s, .). A training step on a batch:

1. Critic and mixer, one step (critic_lr) on

       loss = 0.5 * mean over valid t of (Q_tot(s_t, one-hot u_t) - y_t)^2

   with y the TD(lambda) returns of the target critic and mixer, lambda = lambd (0 on the off-policy
   samples of the on_off loop: one-step targets).
2. Actors (on-policy batches only), one step (lr) that climbs the critic through their policies, with
   the adaptive entropy term of LICA (policy_learner.adaptive_entropy_loss, entropy_coef):

       loss = -mean over valid t of Q_tot(s_t, pi_t) - (entropy_coef / H) * H

The optimisers are Adam (eps optimizer_epsilon) or RMSprop (optim_alpha, optim_eps), by ``optimizer``. The
target critic and mixer are refreshed every target_update_interval episodes. Stats under PyMARL2's names:
critic_loss, critic_grad_norm, target_vals, and for the actors pg_loss, entropy_loss, agent_grad_norm,
pi_max. PyMARL2 also keeps a target controller that nothing reads; it is left out.
"""
import copy
from types import SimpleNamespace

import torch as th
from torch.optim import Adam, RMSprop

from components.episode_buffer import EpisodeBatch
from modules.critics import FMACCritic
from modules.mixers import REGISTRY as mixer_REGISTRY
from utils.rl_utils import build_td_lambda_targets
from utils.th_utils import one_hot

from .policy_learner import PolicyLearner, adaptive_entropy_loss, entropy, masked_mean
from .q_learner import Transitions, batch_transitions

# PyMARL2's fmac_learner builds its modules/mixers/qmix.py (marlkit's qmix_original) for "qmix".
MIXERS = {"qmix": "qmix_original", "vdn": "vdn"}


def make_optimiser(params: list, lr: float, args: SimpleNamespace) -> th.optim.Optimizer:
    if args.optimizer == "adam":
        return Adam(params=params, lr=lr, eps=args.optimizer_epsilon)
    if args.optimizer == "rmsprop":
        return RMSprop(params=params, lr=lr, alpha=args.optim_alpha, eps=args.optim_eps)
    raise ValueError(f"unknown optimizer '{args.optimizer}'; use adam or rmsprop")


class FMACLearner(PolicyLearner):
    """Trains ``mac`` (lica_mac: a policy), the RIIT critic and its mixer."""

    COUNTERS = ("log_stats_t", "last_target_update_step")  # the latter counts episodes here

    def __init__(self, mac, scheme: dict, logger, args: SimpleNamespace):
        super().__init__(mac, logger, args)
        if args.mixer not in MIXERS:
            raise ValueError(f"fmac_learner mixes the agents' Q-values with {' or '.join(MIXERS)}, not '{args.mixer}'")
        self.critic = FMACCritic(scheme, args)
        self.mixer = mixer_REGISTRY[MIXERS[args.mixer]](args)
        self.target_critic = copy.deepcopy(self.critic)
        self.target_mixer = copy.deepcopy(self.mixer)
        self.agent_params = list(mac.parameters())
        self.critic_params = list(self.critic.parameters()) + list(self.mixer.parameters())
        self.agent_optimiser = make_optimiser(self.agent_params, args.lr, args)
        self.critic_optimiser = make_optimiser(self.critic_params, args.critic_lr, args)
        self.networks = {"critic.th": self.critic, "mixer.th": self.mixer}
        self.target_networks = {"critic.th": self.target_critic, "mixer.th": self.target_mixer}
        self.optimisers = {"opt.th": self.agent_optimiser, "critic_opt.th": self.critic_optimiser}
        self.last_target_update_step = 0

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int, per_weight: th.Tensor | None = None) -> dict:
        """The critic's step with TD(lambd) targets, then the actors'; per_weight (prioritized replay) is
        refused at construction."""
        data = batch_transitions(batch)
        critic_stats = self._train_critic(batch, data, self.args.lambd, t_env)
        policies = self._policies(batch)[:, :-1]  # [bs, T-1, n_agents, n_actions]
        q_tot = self.mixer(self.critic(batch, policies)[..., 0], batch["state"][:, :-1])  # [bs, T-1, 1]
        pg_value = masked_mean(q_tot, data.mask)
        mean_entropy = masked_mean(entropy(policies).mean(-1, keepdim=True), data.mask)  # agents' mean [bs, T-1, 1]
        loss = adaptive_entropy_loss(pg_value, mean_entropy, self.args.entropy_coef)
        grad_norm = self._optimise(self.agent_optimiser, self.agent_params, loss, t_env)
        self._refresh_targets(episode_num, quiet=True)
        if self._logging(t_env):
            self._log({**critic_stats, "pg_loss": -pg_value.detach(), "entropy_loss": mean_entropy.detach(),
                       "agent_grad_norm": grad_norm,
                       "pi_max": masked_mean(policies.detach().max(dim=-1)[0], data.mask)}, t_env)
        return {}

    def train_off_policy(self, batch: EpisodeBatch, t_env: int, episode_num: int) -> None:
        """The critic's step alone, with one-step targets (the on_off loop's off-policy sample)."""
        critic_stats = self._train_critic(batch, batch_transitions(batch), 0.0, t_env)
        self._refresh_targets(episode_num, quiet=True)
        if self._logging(t_env):  # as PyMARL2: logged without moving the logging schedule on
            for key, value in critic_stats.items():
                self.logger.log_stat(key, float(value), t_env)

    def _train_critic(self, batch: EpisodeBatch, data: Transitions, td_lambda: float, t_env: int) -> dict:
        actions = one_hot(batch["actions"], self.n_actions)  # [bs, T, n_agents, n_actions]
        states = batch["state"]  # [bs, T, state]
        with th.no_grad():
            target_q = self.target_mixer(self.target_critic(batch, actions)[..., 0], states)  # [bs, T, 1]
            targets = build_td_lambda_targets(data.rewards, data.terminated, data.mask, target_q, self.n_agents,
                                              self.args.gamma, td_lambda)  # [bs, T-1, 1]
        q_taken = self.mixer(self.critic(batch, actions[:, :-1])[..., 0], states[:, :-1])  # [bs, T-1, 1]
        loss = 0.5 * ((q_taken - targets) * data.mask).pow(2).sum() / data.mask.sum()
        grad_norm = self._optimise(self.critic_optimiser, self.critic_params, loss, t_env)
        return {"critic_loss": loss.detach(), "critic_grad_norm": grad_norm,
                "target_vals": masked_mean(targets, data.mask)}

