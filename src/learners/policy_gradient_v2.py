"""PyMARL2's policy_gradient_v2 learner, which VMIX (vmix.yaml) uses: actor-critic with the agents' state
values mixed into a joint value (ppo_mac + rnn_ppo: each agent network outputs its policy and V^i).

One optimiser step per train call on

    V_tot    = mixer(V^1 .. V^n, s)            (QMIX: PyMARL's original mixer, as PyMARL2's; or VDN)
    G        = TD(lambda) returns (td_lambda) of V_tot, without gradients
    A        = G - V_tot                       (the same for every agent, no gradient)
    loss     = pg_loss + vf_coef * vf_loss - ent_coef * entropy
    pg_loss  = -mean over valid (t, i) of A_t log pi^i(u_t^i)
    vf_loss  = mean over valid t of (V_tot - G)^2
    entropy  = mean over valid (t, i) of the entropy of pi^i

with one optimiser for the agent and the mixer (vmix.yaml: RMSprop with torch's defaults besides lr, as
PyMARL2's learner builds it; ``optim: adam`` for Adam). Stats under PyMARL2's names: critic_loss,
td_error_abs, q_taken_mean (V_tot), target_mean (G), pg_loss, advantage_mean, coma_loss (the total
loss), entropy_loss, agent_grad_norm. With ``mixer: null`` each agent's advantage comes from its own
value (PyMARL2's learner cannot run without a mixer). PyMARL2 also builds a target controller that
nothing uses; it is left out.
"""
from types import SimpleNamespace

import torch as th
from torch.optim import Adam, RMSprop

from components.episode_buffer import EpisodeBatch
from modules.mixers import REGISTRY as mixer_REGISTRY
from utils.rl_utils import build_td_lambda_targets

from .policy_learner import PolicyLearner, entropy, masked_mean, taken
from .q_learner import Transitions, batch_transitions

# The mixers of the joint value: PyMARL2's learner builds its modules/mixers/qmix.py (marlkit's
# qmix_original) for "qmix".
MIXERS = {"qmix": "qmix_original", "vdn": "vdn"}
OPTIMS = ("adam", "rmsprop")


class PolicyGradientV2Learner(PolicyLearner):
    """Trains ``mac`` (a PPOMAC: policy and value per agent) and the value mixer named by ``args.mixer``."""

    def __init__(self, mac, scheme: dict, logger, args: SimpleNamespace):
        super().__init__(mac, logger, args)
        self.params = list(mac.parameters())
        self.mixer = None
        if args.mixer is not None:
            if args.mixer not in MIXERS:
                raise ValueError(f"policy_gradient_v2 mixes the agents' values with {' or '.join(MIXERS)} (or "
                                 f"mixer null), not '{args.mixer}'")
            self.mixer = mixer_REGISTRY[MIXERS[args.mixer]](args)
            self.params += list(self.mixer.parameters())
            self.networks = {"mixer.th": self.mixer}
        if args.optim not in OPTIMS:
            raise ValueError(f"unknown optim '{args.optim}'; use one of: {', '.join(OPTIMS)}")
        optimiser = Adam if args.optim == "adam" else RMSprop
        self.optimiser = optimiser(params=self.params, lr=args.lr)
        self.optimisers = {"opt.th": self.optimiser}

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int, per_weight: th.Tensor | None = None) -> dict:
        """One actor-critic step on the batch; per_weight (prioritized replay) is refused at construction."""
        data = batch_transitions(batch)
        policies, values = self._policies(batch)  # [bs, T, n_agents, n_actions], [bs, T, n_agents, 1]
        joint_values = self._mix(values.squeeze(-1), batch["state"])  # [bs, T, k]
        loss, stats = self._loss(policies[:, :-1], joint_values, data)
        grad_norm = self._optimise(self.optimiser, self.params, loss, t_env)
        if self._logging(t_env):
            self._log({**stats, "agent_grad_norm": grad_norm}, t_env)
        return {}

    def _mix(self, agent_values: th.Tensor, states: th.Tensor) -> th.Tensor:
        """[bs, T, n_agents] -> V_tot [bs, T, 1]; the agents' own values without a mixer."""
        return agent_values if self.mixer is None else self.mixer(agent_values, states)

    def _loss(self, policies: th.Tensor, joint_values: th.Tensor, data: Transitions) -> tuple[th.Tensor, dict]:
        """The loss of policies [bs, T-1, n_agents, n_actions] and joint values [bs, T, k] (k = 1, or
        n_agents without a mixer), and its stats."""
        mask = data.mask  # [bs, T-1, 1]
        with th.no_grad():
            targets = build_td_lambda_targets(data.rewards, data.terminated, mask, joint_values, self.n_agents,
                                              self.args.gamma, self.args.td_lambda)  # [bs, T-1, k]
        values = joint_values[:, :-1]  # [bs, T-1, k]
        advantages = (targets - values).detach()  # [bs, T-1, k]: broadcasts over the agents
        # Padded steps have no available action: their (zero) probability is replaced before the log.
        pi_taken = taken(policies, data.actions).masked_fill(mask == 0, 1.0)  # [bs, T-1, n_agents]
        pg_loss = -masked_mean(advantages * th.log(pi_taken), mask)
        td_error = values - targets
        vf_loss = masked_mean(td_error ** 2, mask)
        entropy_loss = masked_mean(entropy(policies), mask)
        loss = pg_loss + self.args.vf_coef * vf_loss - self.args.ent_coef * entropy_loss
        stats = {"critic_loss": vf_loss.detach(), "td_error_abs": masked_mean(td_error.detach().abs(), mask),
                 "q_taken_mean": masked_mean(values.detach(), mask), "target_mean": masked_mean(targets, mask),
                 "pg_loss": pg_loss.detach(), "advantage_mean": masked_mean(advantages, mask),
                 "coma_loss": loss.detach(), "entropy_loss": entropy_loss.detach()}
        return loss, stats
