"""PyMARL2's PPO learner (``learner: ppo_learner``), which IPPO (ippo.yaml) uses: independent PPO with
a per-agent critic V(tau^i) on each agent's own inputs, value normalisation and value clipping.

The critic is a second network of the agent's class (n_rnn: LayerNorm, orthogonal initialisation)
with one output, on the controller's inputs; actor and critic share one Adam optimiser (lr).

One train call on a batch (actions sampled with probabilities pi_old, stored by the runner with
save_probs):

    V_old      = critic before the update, at every stored step (denormalised with use_value_norm)
    A, G       = build_gae_targets(r, d, mask, V_old, gamma, gae_lambda)   (per agent, shared reward)
    G          = value_norm.normalize(G) after folding G into the running statistics (use_value_norm)
    A          = (A - mean A) / (std A + 1e-6)   over the valid steps
    then mini_epochs times, over the whole batch:
        ratio       = pi(u) / pi_old(u)
        actor_loss  = -mean min(ratio A, clip(ratio, 1 - eps_clip, 1 + eps_clip) A)
        critic_loss = 0.5 mean max((V - G)^2, (V_old + clip(V - V_old, -eps_clip, eps_clip) - G)^2)
        H           = mean entropy of pi
        loss        = actor_loss + critic_coef critic_loss - entropy H / H.item()

(PyMARL2 divides the entropy bonus by its own value, which scales its gradient by 1 / H.) Means
are over valid (step, agent) entries. Stats under PyMARL2's names: advantage_mean, actor_loss,
entropy_loss, grad_norm, lr, critic_loss, target_mean (of the last epoch).

Where PyMARL2 is broken this differs: GAE does not bootstrap from the state after a terminal
transition and gives padded steps 0 (see build_gae_targets); the advantages are normalised and the
value statistics updated over valid entries only (PyMARL2 counts the padding in); without
use_value_norm the values are used as they are (PyMARL2 raises a NameError); the critic and the
value statistics are saved with the checkpoint (PyMARL2 saves neither).
"""
from types import SimpleNamespace

import torch as th
from torch.optim import Adam

from components.episode_buffer import EpisodeBatch
from modules.agents import REGISTRY as agent_REGISTRY
from utils.rl_utils import build_gae_targets
from utils.value_norm import ValueNorm

from .policy_learner import PolicyLearner, entropy, masked_mean, taken
from .q_learner import Transitions, batch_transitions

UNAVAILABLE_PROBABILITY = 1e-10  # PyMARL2's stand-in for the probability of an unavailable action
ADVANTAGE_STD_EPSILON = 1e-6


def clipped_surrogate_loss(log_pi: th.Tensor, old_log_pi: th.Tensor, advantages: th.Tensor, eps_clip: float,
                           mask: th.Tensor, max_ratio: float | None = None) -> th.Tensor:
    """PPO's clipped objective, negated: -mean over valid entries of min(r A, clip(r, 1 - eps, 1 + eps) A)
    with r = exp(log_pi - old_log_pi), first clamped to [0, max_ratio] if given (benellis3/mappo's 16);
    all [...] of one shape, mask broadcast to it."""
    ratios = th.exp(log_pi - old_log_pi)
    if max_ratio is not None:
        ratios = ratios.clamp(0.0, max_ratio)
    surrogate = th.min(ratios * advantages, th.clamp(ratios, 1 - eps_clip, 1 + eps_clip) * advantages)
    return -masked_mean(surrogate, mask)


def clipped_value_loss(values: th.Tensor, old_values: th.Tensor, targets: th.Tensor, eps_clip: float,
                       mask: th.Tensor) -> th.Tensor:
    """0.5 * mean over valid entries of max((V - G)^2, (V_old + clip(V - V_old, -eps, eps) - G)^2)."""
    clipped = old_values + (values - old_values).clamp(-eps_clip, eps_clip)
    return 0.5 * masked_mean(th.max((values - targets) ** 2, (clipped - targets) ** 2), mask)


def normalise_advantages(advantages: th.Tensor, mask: th.Tensor) -> th.Tensor:
    """(A - mean) / (std + 1e-6) with the mean and (unbiased) std over the valid entries."""
    mask = mask.expand_as(advantages)
    valid = advantages[mask > 0]
    return (advantages - valid.mean()) / (valid.std() + ADVANTAGE_STD_EPSILON)


class PPOLearner(PolicyLearner):
    """Trains ``mac`` (a policy) and a per-agent critic of the same network class with PPO."""

    def __init__(self, mac, scheme: dict, logger, args: SimpleNamespace):
        super().__init__(mac, logger, args)
        self.critic = agent_REGISTRY[args.agent](mac.input_shape, SimpleNamespace(**{**vars(args), "n_actions": 1}))
        self.params = list(mac.parameters()) + list(self.critic.parameters())
        self.optimiser = Adam(params=self.params, lr=args.lr)
        self.value_norm = ValueNorm() if args.use_value_norm else None
        self.networks = {"critic.th": self.critic}
        if self.value_norm is not None:
            self.networks["value_norm.th"] = self.value_norm
        self.optimisers = {"agent_opt.th": self.optimiser}

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int, per_weight: th.Tensor | None = None) -> dict:
        """mini_epochs PPO steps on the batch; per_weight (prioritized replay) is refused at construction."""
        data = batch_transitions(batch)
        mask = data.mask  # [bs, T-1, 1]: broadcasts over the agents
        actions = data.actions  # [bs, T-1, n_agents, 1]
        old_pi_taken = taken(batch["probs"][:, :-1], actions).clamp(min=UNAVAILABLE_PROBABILITY)
        old_log_pi = th.log(old_pi_taken)  # [bs, T-1, n_agents]
        inputs = self.mac.build_sequence_inputs(batch)  # [bs, T, n_agents, input]: built once for every epoch
        with th.no_grad():
            old_values = self._values(inputs)  # [bs, T, n_agents], normalised with use_value_norm
            advantages, targets = self._advantages_and_targets(data, old_values)  # [bs, T-1, n_agents] each
        avail_actions = batch["avail_actions"][:, :-1]  # [bs, T-1, n_agents, n_actions]
        for _ in range(self.args.mini_epochs):
            values = self._values(inputs)[:, :-1]  # [bs, T-1, n_agents]
            critic_loss = clipped_value_loss(values, old_values[:, :-1], targets, self.args.eps_clip, mask)
            pi = self._policies(batch, inputs)[:, :-1].masked_fill(avail_actions == 0, UNAVAILABLE_PROBABILITY)
            actor_loss = clipped_surrogate_loss(th.log(taken(pi, actions)), old_log_pi, advantages,
                                                self.args.eps_clip, mask)
            entropy_loss = masked_mean(entropy(pi / pi.sum(-1, keepdim=True)), mask)
            loss = (actor_loss + self.args.critic_coef * critic_loss
                    - self.args.entropy * entropy_loss / entropy_loss.item())
            grad_norm = self._optimise(self.optimiser, self.params, loss, t_env)

        if self._logging(t_env):
            self._log({"advantage_mean": masked_mean(advantages, mask), "actor_loss": actor_loss.detach(),
                       "entropy_loss": entropy_loss.detach(), "grad_norm": grad_norm, "lr": self.args.lr,
                       "critic_loss": critic_loss.detach(), "target_mean": masked_mean(targets, mask)}, t_env)
        return {}

    def _advantages_and_targets(self, data: Transitions, old_values: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        """Normalised GAE advantages and the critic's (normalised) targets: [bs, T-1, n_agents] each."""
        values = old_values if self.value_norm is None else self.value_norm.denormalize(old_values)
        advantages, targets = build_gae_targets(data.rewards, data.terminated, data.mask, values,
                                                self.args.gamma, self.args.gae_lambda)
        if self.value_norm is not None:
            self.value_norm.update(targets[data.mask.expand_as(targets) > 0])
            targets = self.value_norm.normalize(targets)
        return normalise_advantages(advantages, data.mask), targets

    def _values(self, inputs: th.Tensor) -> th.Tensor:
        """The critic's values at every stored step from fresh memory, of the controller's inputs
        [bs, T, n_agents, input]: [bs, T, n_agents]."""
        self.critic.train()
        if not self.stepwise:
            return self.critic.forward_sequence(inputs).squeeze(-1)
        hidden, values = None, []
        for t in range(inputs.shape[1]):
            value, hidden = self.critic(inputs[:, t], hidden)  # [bs, n_agents, 1], [bs, n_agents, hidden]
            values.append(value)
        return th.stack(values, dim=1).squeeze(-1)  # [bs, T, n_agents]

