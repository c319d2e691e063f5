"""EPyMARL's MADDPG (``learner: maddpg_learner``; configs ``maddpg``, ``maddpg_ns``) for discrete actions:
deterministic-policy-gradient actors made differentiable by Gumbel-softmax samples, each agent with a
centralised critic Q_i(s, u_1..u_n) (modules/critics/state_value.py, maddpg_critic / maddpg_critic_ns).

One train call on a batch (T stored steps, T-1 transitions, agents i = 1..n, actions one-hot):

1. Rewards standardised by their running statistics (standardise_rewards); every agent gets the team's,
   or with common_reward=False its own.
2. Critic, one Adam step (lr), on the valid steps:

       y_i,t = r_i,t + gamma (1 - d_t) Q'_i(s_{t+1}, u'_{t+1}),    u'_j = one-hot argmax of the target actor j
       loss  = sum over valid (t, i) of (Q_i(s_t, u_t) - y_i,t)^2 / their number

   (with standardise_returns Q' de-standardised and y standardised, as EPyMARL).
3. Actor, one Adam step (lr): every agent samples g_j = gumbel_softmax(logits_j, hard) (a one-hot forward,
   the soft sample's gradient); agent i's critic sees the joint g with only g_i carrying a gradient:

       loss = -mean over valid (t, i) of Q_i(s_t, g_1..g_n) + reg * mean over valid (t, i, a) of logits^2

   where the logits of unavailable actions count as 0 in the regulariser.
4. Targets (actor and critic): target_update_interval_or_tau above 1 is a copy every that many episodes
   (EPyMARL counts episodes here), at most 1 a soft update with that tau after every call.

Actions are sampled from softmax(logits) over the available actions in training and test episodes (the
``soft_policies`` selector: EPyMARL's Gumbel-max sample, the same distribution). Stats under EPyMARL's
names: critic_loss, critic_grad_norm, td_error_abs, q_taken_mean, target_mean, pg_loss, agent_grad_norm.

Where EPyMARL's learner is wrong, marlkit does better (docs/algorithms.md): EPyMARL masks with
1 - terminated, which drops every episode's terminal transition from both losses and counts the padding
after shorter episodes as data, and averages over that padding; here the mask is the valid steps. Its
target actor starts its memory at t = 1 (skipping the first observation); here both actors run from t = 0.
"""
import copy
import os
from types import SimpleNamespace

import torch as th

from components.action_selectors import UNAVAILABLE_LOGIT, gumbel_softmax
from components.episode_buffer import EpisodeBatch
from modules.critics import REGISTRY as critic_REGISTRY
from utils.th_utils import follow_targets, one_hot

from .policy_learner import PolicyLearner, masked_mean
from .q_learner import TARGET_DIR
from .standardised import StandardisedLearner

CRITIC_TYPES = ("maddpg_critic", "maddpg_critic_ns")


def joint_actions(actions: th.Tensor) -> th.Tensor:
    """Every agent's one-hot action [bs, T, n, n_actions] -> the joint one, as each agent's critic sees it
    [bs, T, n, n * n_actions]."""
    bs, steps, n, n_actions = actions.shape
    return actions.reshape(bs, steps, 1, n * n_actions).expand(-1, -1, n, -1)  # [bs, T, n, n * n_actions]


def own_gradient_joint_actions(samples: th.Tensor) -> th.Tensor:
    """The joint action of samples [bs, T, n, n_actions] as agent i's critic sees it in the actor step:
    the same values as joint_actions, with only agent i's own action carrying a gradient (the others'
    detached) -> [bs, T, n, n * n_actions]."""
    bs, steps, n, n_actions = samples.shape
    detached = samples.detach()
    own = th.eye(n, dtype=samples.dtype, device=samples.device)[:, :, None]  # [n (critic i), n (agent j), 1]
    # [bs, T, 1, n, A] + [n, n, 1] * [bs, T, 1, n, A] -> [bs, T, n, n, A]: value g_j, gradient where j = i
    joint = detached.unsqueeze(2) + own * (samples - detached).unsqueeze(2)
    return joint.reshape(bs, steps, n, n * n_actions)  # [bs, T, n (critic i), n * n_actions]


class MADDPGLearner(StandardisedLearner, PolicyLearner):
    """Trains ``mac`` (agent_output_type pi_logits; its raw outputs are the actors' logits) and the critic."""

    COUNTERS = ("log_stats_t", "last_target_update_step")  # the targets follow episodes, not critic steps

    def __init__(self, mac, scheme: dict, logger, args: SimpleNamespace):
        super().__init__(mac, logger, args)
        if args.critic_type not in CRITIC_TYPES:
            raise ValueError(f"critic_type={args.critic_type!r}: {args.learner} takes {', '.join(CRITIC_TYPES)}")
        if self.stepwise:
            raise ValueError(f"train_unroll=stepwise: {args.learner} unrolls its actors in one fused pass only")
        if not hasattr(mac.agent, "forward_sequence_pair"):
            raise ValueError(f"agent={args.agent}: {args.learner} needs an agent that unrolls whole episodes "
                             f"(rnn or rnn_ns)")
        self._add_critic(critic_REGISTRY[args.critic_type](scheme, args), critic_lr=args.lr)
        self.target_mac = copy.deepcopy(mac)
        self._init_standardisation(args, (self.n_agents,))

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int, per_weight: th.Tensor | None = None) -> dict:
        """One critic step, then one actor step; per_weight (prioritized replay) is refused at construction."""
        prepared = self._prepare(batch, t_env)
        if prepared is None:
            return {}
        data, rewards, mask = prepared  # rewards and mask [bs, T-1, n]
        self.mac.agent.train()
        logits, target_logits = self._logits(batch)  # [bs, T, n, n_actions] each
        inputs = self.critic.build_inputs(batch)  # [bs, T, n, input]
        critic_stats = self._train_critic(batch, inputs, target_logits, rewards, data.terminated, mask, t_env)
        actor_stats = self._train_actor(batch, inputs, logits, mask, t_env)
        self.last_target_update_step = follow_targets(
            self.args.target_update_interval_or_tau, episode_num, self.last_target_update_step, self._copy_targets,
            [(self.target_mac.agent, self.mac.agent), (self.target_critic, self.critic)])
        if self._logging(t_env):
            self._log({**critic_stats, **actor_stats}, t_env)
        return {}

    def _logits(self, batch: EpisodeBatch) -> tuple[th.Tensor, th.Tensor]:
        """The actors' logits (with gradients) and the target actors' (without) at every stored step from
        zero memory, unavailable actions at UNAVAILABLE_LOGIT: [bs, T, n, n_actions] each."""
        inputs = self.mac.build_sequence_inputs(batch)  # [bs, T, n, input]
        logits, target_logits = self.mac.agent.forward_sequence_pair(self.target_mac.agent, inputs)
        unavailable = batch["avail_actions"] == 0  # [bs, T, n, n_actions]
        return logits.masked_fill(unavailable, UNAVAILABLE_LOGIT), target_logits.masked_fill(unavailable,
                                                                                             UNAVAILABLE_LOGIT)

    def _train_critic(self, batch: EpisodeBatch, inputs: th.Tensor, target_logits: th.Tensor, rewards: th.Tensor,
                      terminated: th.Tensor, mask: th.Tensor, t_env: int) -> dict:
        """One critic step on the one-step targets of the target actors and critic; the step's stats."""
        taken = joint_actions(one_hot(batch["actions"][:, :-1], self.n_actions))  # [bs, T-1, n, n*A]
        q_taken = self.critic(inputs[:, :-1], taken)[..., 0]  # [bs, T-1, n]
        with th.no_grad():
            target_actions = one_hot(target_logits[:, 1:].argmax(dim=-1, keepdim=True), self.n_actions)
            target_q = self.target_critic(inputs[:, 1:], joint_actions(target_actions))[..., 0]  # [bs, T-1, n]
            target_q = self.standardisation.values(target_q)
            targets = self.standardisation.returns(rewards + self.args.gamma * (1 - terminated) * target_q)
        masked_td_error = (q_taken - targets) * mask  # [bs, T-1, n]
        loss = masked_mean(masked_td_error.pow(2), mask)
        grad_norm = self._optimise(self.critic_optimiser, self.critic_params, loss, t_env)
        return {"critic_loss": loss.detach(), "critic_grad_norm": grad_norm,
                "td_error_abs": masked_mean(masked_td_error.detach().abs(), mask),
                "q_taken_mean": masked_mean(q_taken.detach(), mask), "target_mean": masked_mean(targets, mask)}

    def _train_actor(self, batch: EpisodeBatch, inputs: th.Tensor, logits: th.Tensor, mask: th.Tensor,
                     t_env: int) -> dict:
        """One actor step through the (just updated) critic; the step's stats."""
        logits = logits[:, :-1]  # [bs, T-1, n, n_actions]
        samples = gumbel_softmax(logits, hard=True)  # one-hot forward, the soft sample's gradient
        q = self.critic(inputs[:, :-1], own_gradient_joint_actions(samples))[..., 0]  # [bs, T-1, n]
        unavailable = batch["avail_actions"][:, :-1] == 0  # [bs, T-1, n, n_actions]
        regulariser = logits.masked_fill(unavailable, 0.0).pow(2).mean(dim=-1)  # [bs, T-1, n]
        loss = -masked_mean(q, mask) + self.args.reg * masked_mean(regulariser, mask)
        grad_norm = self._optimise(self.agent_optimiser, self.agent_params, loss, t_env)
        return {"pg_loss": loss.detach(), "agent_grad_norm": grad_norm}

    def _copy_targets(self) -> None:
        self.target_mac.load_state(self.mac)
        self.target_critic.load_state_dict(self.critic.state_dict())

    def cuda(self) -> None:
        super().cuda()
        self.target_mac.cuda()

    def save_models(self, path: str) -> None:
        """PolicyLearner's files, and the target actors as target/agent.th."""
        super().save_models(path)
        self.target_mac.save_models(os.path.join(path, TARGET_DIR))

    def model_files(self) -> list:
        return super().model_files() + [os.path.join(TARGET_DIR, self.mac.AGENT_FILE)]

    def load_models(self, path: str) -> None:
        """Load what save_models wrote; the target actors and critic start as copies of the loaded ones."""
        super().load_models(path)
        self.target_mac.load_state(self.mac)

    def load_target_models(self, path: str) -> None:
        super().load_target_models(path)
        self.target_mac.load_models(os.path.join(path, TARGET_DIR))
