"""benellis3/mappo's ``trust_region_learner`` as its ``clipping_rnn_central_V`` config runs it: the MAPPO of
the SMACv2 paper (preset ``mappo_smacv2``). Facts read from benellis3/mappo at 58c9472:
src/learners/trust_region_learner.py (the update), src/modules/critics/centralV_rnn_critic.py (the critic),
src/controllers/basic_controller.py and src/modules/agents/rnn_agent.py (the actor, the normalised
observations while acting, truncated BPTT), src/components/running_mean_std.py (the statistics),
src/config/algs/clipping_rnn_central_V.yaml, src/config/default.yaml and run.sh (the values).

One train call on a batch (the batch_size newest episodes; T stored steps, T-1 transitions; agents i; one
team reward r_t; "valid" steps: the filled transitions up to the terminal one):

1. Agent i lives at step t where an action other than 0 is available to it (SMAC's dead units have only
   the no-op, action 0; padded steps have none): living_agents.
2. With normalise_obs the observation statistics (the controller's: it normalises while acting too) take
   the living agents' observations of every stored step, and the state statistics (the critic's) the
   states of the valid steps; from then on actor and critic see their inputs normalised by them.
3. log pi_old(u): the actor before this call's steps, on those inputs (the first actor step's ratio is 1).
4. G = GAE targets (build_gae_targets, gamma and gae_lambda) of the critic's values before its steps.
5. mini_epochs_critic Adam steps of the critic (critic_lr) on the whole batch:
       critic_loss = 0.5 mean over valid (t, i) of (V_i(t) - G_i(t))^2
6. A = GAE advantages of the updated critic's values, normalised over the living agents' valid steps.
7. mini_epochs_actor Adam steps of the actor (lr annealed linearly to 0: lr (1 - t_env / lr_anneal_time), t_max
   without lr_anneal_time):
       rho = clamp(pi(u) / pi_old(u), 0, 16)
       actor_loss = -mean over living valid (t, i) of min(rho A, clip(rho, 1 - eps_clip, 1 + eps_clip) A)
                    - entropy_coef * mean over living valid (t, i) of the entropy of pi
   with pi the softmax of the agent's logits over the available actions.

Both networks are GRUs unrolled over whole episodes from zero memory, their memory detached every
detach_every steps (truncated backpropagation through time). Both Adams take eps optim_eps. No target critic.
Stats: critic_loss, actor_loss and entropy (means over the epochs, as benellis3/mappo logs them),
target_mean (G), advantage_mean (before normalisation), lr, critic_lr, agent_grad_norm and critic_grad_norm
(of the last step).

Where this differs from benellis3/mappo (see docs/smacv2.md): the lr of a call is annealed by that call's
t_env (benellis3/mappo's LambdaLR sets it from the previous call's); the actor's loss, its entropy and the
advantage normalisation cover the living agents' valid steps (benellis3/mappo's alive mask also counts the
step stored after a terminal one, whose advantage comes from padding), and the normalisation divides by
std + 1e-6 (normalise_advantages; benellis3/mappo by sqrt(var + 1e-6)); inputs of dead agents and invalid
steps are normalised as the others are, in training as while acting (benellis3/mappo zeroes them in
training only); a time-out the env flags as not terminal bootstraps from its last state (never on SMAC);
every network, optimiser and statistic is saved and loaded.
"""
from types import SimpleNamespace

import torch as th
from torch.optim import Adam

from components.episode_buffer import EpisodeBatch
from modules.agents.rnn_agent import RNNAgent
from modules.critics import REGISTRY as critic_REGISTRY
from utils.rl_utils import build_gae_targets

from .policy_learner import PolicyLearner, entropy, masked_mean, taken
from .ppo_learner import clipped_surrogate_loss, normalise_advantages
from .q_learner import Transitions, batch_transitions

MAX_RATIO = 16.0  # benellis3/mappo clamps the probability ratio to [0, 16] before clipping it
CRITIC_LOSS_SCALE = 0.5


def living_agents(avail_actions: th.Tensor) -> th.Tensor:
    """Where each agent lives, avail_actions [bs, T, n_agents, n_actions] -> bool [bs, T, n_agents]: where an
    action other than 0 is available. On SMAC this is benellis3/mappo's test (no-op unavailable, some action
    available): only dead units have the no-op, and only it."""
    return avail_actions[..., 1:].any(dim=-1)


class TrustRegionLearner(PolicyLearner):
    """Trains ``mac`` (a recurrent policy: agent_output_type pi_logits) and the critic critic_type."""

    CRITIC_TYPES = ("centralV_rnn_critic",)

    def __init__(self, mac, scheme: dict, logger, args: SimpleNamespace):
        super().__init__(mac, logger, args)
        self._check(mac, args)
        self.critic = critic_REGISTRY[args.critic_type](scheme, args)
        self.agent_params = list(mac.parameters())
        self.critic_params = list(self.critic.parameters())
        self.agent_optimiser = Adam(params=self.agent_params, lr=args.lr, eps=args.optim_eps)
        self.critic_optimiser = Adam(params=self.critic_params, lr=args.critic_lr, eps=args.optim_eps)
        self.networks = {"critic.th": self.critic}
        if mac.obs_normaliser is not None:
            self.networks["obs_normaliser.th"] = mac.obs_normaliser
        self.optimisers = {"agent_opt.th": self.agent_optimiser, "critic_opt.th": self.critic_optimiser}

    @staticmethod
    def _check(mac, args: SimpleNamespace) -> None:
        if args.critic_type not in TrustRegionLearner.CRITIC_TYPES:
            raise ValueError(f"critic_type={args.critic_type!r}: {args.learner} takes "
                             f"{', '.join(TrustRegionLearner.CRITIC_TYPES)}")
        if getattr(args, "train_unroll", "fused") == "stepwise":
            raise ValueError(f"train_unroll=stepwise: {args.learner} unrolls its networks in one fused pass only")
        if not isinstance(mac.agent, RNNAgent):
            raise ValueError(f"agent={args.agent}: {args.learner} needs a recurrent agent of the rnn family "
                             f"(rnn, n_rnn)")
        if mac.agent_output_type != "pi_logits":
            raise ValueError(f"agent_output_type={mac.agent_output_type!r}: {args.learner} needs 'pi_logits'")

    def annealed_lr(self, t_env: int) -> float:
        """The actor's learning rate at t_env: lr falling linearly to 0 at lr_anneal_time (null: t_max; benellis3/mappo
        anneals over its t_max, so a shorter run of its schedule sets lr_anneal_time to that t_max), then 0."""
        anneal_time = self.args.lr_anneal_time or self.args.t_max
        return self.args.lr * max(0.0, 1.0 - t_env / anneal_time)

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int, per_weight: th.Tensor | None = None) -> dict:
        """The critic's steps, then the actor's; per_weight (prioritized replay) is refused at construction."""
        data = batch_transitions(batch)
        living = living_agents(batch["avail_actions"])  # [bs, T, n_agents]
        actor_mask = data.mask * living[:, :-1]  # [bs, T-1, n_agents]: living agents' valid steps
        if self.mac.obs_normaliser is not None:
            self._update_statistics(batch, living, data.mask)
        inputs = self.mac.build_sequence_inputs(batch)  # [bs, T, n_agents, input]: built once for every epoch
        critic_inputs = self.critic.build_inputs(batch, self.mac.normalise_obs(batch["obs"]))  # [bs, T, n, input]
        avail_actions = batch["avail_actions"]  # [bs, T, n_agents, n_actions]
        with th.no_grad():
            old_log_pi = taken(self._log_policies(inputs, avail_actions)[:, :-1], data.actions)  # [bs, T-1, n]
        critic_stats = self._train_critic(critic_inputs, data, t_env)
        with th.no_grad():
            advantages, _ = self._gae(self.critic(critic_inputs), data)  # [bs, T-1, n_agents]
        for group in self.agent_optimiser.param_groups:
            group["lr"] = self.annealed_lr(t_env)
        actor_stats = self._train_actor(inputs, avail_actions, data.actions, old_log_pi,
                                        normalise_advantages(advantages, actor_mask), actor_mask, t_env)
        if self._logging(t_env):
            self._log({**critic_stats, **actor_stats, "advantage_mean": masked_mean(advantages, actor_mask),
                       "lr": self.agent_optimiser.param_groups[0]["lr"], "critic_lr": self.args.critic_lr}, t_env)
        return {}

    def _update_statistics(self, batch: EpisodeBatch, living: th.Tensor, mask: th.Tensor) -> None:
        """Fold the living agents' observations (living [bs, T, n_agents]) into the controller's statistics and
        the valid steps' states (mask [bs, T-1, 1]) into the critic's."""
        self.mac.obs_normaliser.update(batch["obs"][living])  # [living entries, obs]
        self.critic.state_normaliser.update(batch["state"][:, :-1][mask[..., 0] > 0])  # [valid steps, state]

    def _log_policies(self, inputs: th.Tensor, avail_actions: th.Tensor) -> th.Tensor:
        """log pi [bs, T, n_agents, n_actions] of the actor's inputs [bs, T, n_agents, input], from zero memory,
        with truncated backpropagation every detach_every steps."""
        logits = self.mac.agent.forward_sequence(inputs, detach_every=self.args.detach_every)  # [bs, T, n, A]
        return th.log_softmax(self.mac.masked_logits(logits, avail_actions), dim=-1)

    def _gae(self, values: th.Tensor, data: Transitions) -> tuple[th.Tensor, th.Tensor]:
        """GAE advantages and targets [bs, T-1, n_agents] of the critic's values [bs, T, n_agents]."""
        return build_gae_targets(data.rewards, data.terminated, data.mask, values, self.args.gamma,
                                 self.args.gae_lambda)

    def _train_critic(self, inputs: th.Tensor, data: Transitions, t_env: int) -> dict:
        """mini_epochs_critic steps towards the GAE targets of the critic's values before them; their stats."""
        with th.no_grad():
            _, targets = self._gae(self.critic(inputs), data)  # [bs, T-1, n_agents]
        losses = []
        for _ in range(self.args.mini_epochs_critic):
            values = self.critic(inputs)[:, :-1]  # [bs, T-1, n_agents]
            loss = CRITIC_LOSS_SCALE * masked_mean((values - targets) ** 2, data.mask)
            grad_norm = self._optimise(self.critic_optimiser, self.critic_params, loss, t_env)
            losses.append(loss.detach())
        return {"critic_loss": th.stack(losses).mean(), "critic_grad_norm": grad_norm,
                "target_mean": masked_mean(targets, data.mask)}

    def _train_actor(self, inputs: th.Tensor, avail_actions: th.Tensor, actions: th.Tensor, old_log_pi: th.Tensor,
                     advantages: th.Tensor, mask: th.Tensor, t_env: int) -> dict:
        """mini_epochs_actor steps on the clipped surrogate: inputs [bs, T, n, input], avail_actions
        [bs, T, n, n_actions], actions [bs, T-1, n, 1], old_log_pi, advantages and mask [bs, T-1, n]."""
        losses, entropies = [], []
        for _ in range(self.args.mini_epochs_actor):
            log_pi = self._log_policies(inputs, avail_actions)[:, :-1]  # [bs, T-1, n, n_actions]
            surrogate = clipped_surrogate_loss(taken(log_pi, actions), old_log_pi, advantages, self.args.eps_clip,
                                               mask, max_ratio=MAX_RATIO)
            mean_entropy = masked_mean(entropy(log_pi.exp()), mask)
            loss = surrogate - self.args.entropy_coef * mean_entropy
            grad_norm = self._optimise(self.agent_optimiser, self.agent_params, loss, t_env)
            losses.append(loss.detach())
            entropies.append(mean_entropy.detach())
        return {"actor_loss": th.stack(losses).mean(), "entropy": th.stack(entropies).mean(),
                "agent_grad_norm": grad_norm}
