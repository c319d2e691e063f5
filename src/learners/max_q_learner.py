"""PyMARL2's MAXQLearner (``learner: max_q_learner``): weighted QMIX, OW-QMIX and CW-QMIX (Rashid et al.
2020, "Weighted QMIX: Expanding Monotonic Value Function Factorisation for Deep Multi-Agent RL").

QMIX's monotonic Q_tot cannot represent every joint action-value; projected onto it with equal weight
on all joint actions, the best joint action can be lost. Weighted QMIX learns beside it an
unrestricted central Q* (its own central agent network, central_rnn through basic_central_mac, and a
feed-forward central mixer, central_mixer "ff") and trains both on the same targets, bootstrapped
from Q*:

  u*_t      = the QMIX agents' greedy joint action (online networks, available actions)
  y_t       = TD(lambda) returns on Q*'(s_t, u*_t), the target central networks'
  central   = 0.5 * masked mean of (Q*(s_t, u_t) - y_t)^2
  qmix      = masked mean of w_t (Q_tot(s_t, u_t) - y_t)^2       (no 0.5, as PyMARL2)
  loss      = qmix_loss * qmix + central_loss * central

The weights w_t are 1 where the joint action matters and w (< 1) elsewhere:
  OW-QMIX (hysteretic_qmix True)   1 where Q_tot underestimates the target (Q_tot < y_t), optimistic
  CW-QMIX (hysteretic_qmix False)  1 where u_t is the greedy joint action or y_t exceeds
                                   Q*'(s_t, u*_t), the target central value of the greedy one
With ``mixer: qmix`` the QMIX mixer is PyMARL's original (qmix_original, hypernet_layers from the
YAML), as in PyMARL2. Logged as PyMARL2: loss, qmix_loss, central_loss, w_to_use (the mean weight,
here over valid steps only; PyMARL2 averages padding in too), mixer_norm and agent_norm (gradient
norms of the mixer and the agents before clipping), td_error_abs, q_taken_mean, target_mean, grad_norm.

PyMARL2 saves neither the central networks nor any target network, so a resumed run restarts Q* from
scratch; here they are saved (central_agent.th, central_mixer.th and their targets) and resume exactly.
"""
import copy
import os
from types import SimpleNamespace

import torch as th

from components.episode_buffer import EpisodeBatch
from controllers import REGISTRY as mac_REGISTRY
from modules.mixers import CENTRAL_REGISTRY
from utils.rl_utils import build_td_lambda_targets

from .nq_learner import NQLearner
from .q_learner import TARGET_DIR, UNAVAILABLE_Q, LossOutput, Transitions, masked_squared_error, td_stats

CENTRAL_MIXER_FILE = "central_mixer.th"


def _norm(parameters) -> float:
    """The L2 norm of the parameters' gradients together."""
    return sum(p.grad.pow(2).sum().item() for p in parameters if p.grad is not None) ** 0.5


class MaxQLearner(NQLearner):
    MIXER_ALIASES = {"qmix": "qmix_original"}
    MIXERS = ("qmix", "vdn")

    def _extra_networks(self, scheme: dict, args: SimpleNamespace) -> list:
        """The central controller and mixer and their targets; returns their parameters."""
        if args.central_loss <= 0:
            raise ValueError(f"central_loss={args.central_loss}: weighted QMIX's targets come from the central Q, "
                             f"which needs central_loss > 0 to learn (PyMARL2 fails with 0 too)")
        if args.central_mixer not in CENTRAL_REGISTRY:
            raise ValueError(f"unknown central_mixer '{args.central_mixer}'; known: {', '.join(CENTRAL_REGISTRY)}")
        if args.central_mac not in mac_REGISTRY:
            raise ValueError(f"unknown central_mac '{args.central_mac}'; known: {', '.join(sorted(mac_REGISTRY))}")
        self.central_mac = mac_REGISTRY[args.central_mac](scheme, {"agents": args.n_agents}, args)
        self.target_central_mac = copy.deepcopy(self.central_mac)
        self.central_mixer = CENTRAL_REGISTRY[args.central_mixer](args)
        self.target_central_mixer = copy.deepcopy(self.central_mixer)
        return list(self.central_mac.parameters()) + list(self.central_mixer.parameters())

    def _loss(self, batch: EpisodeBatch, data: Transitions, per_weight: th.Tensor | None) -> LossOutput:
        mac_out, target_mac_out = self._unroll(batch)  # [bs, T, n_agents, n_actions] each
        central_out, target_central_out = self._unroll(batch, self.central_mac, self.target_central_mac)
        # central_out, target_central_out [bs, T, n_agents, n_actions, embed]
        states = batch["state"]
        unavailable = batch["avail_actions"] == 0  # [bs, T, n_agents, n_actions]
        greedy_actions = mac_out.detach().masked_fill(unavailable, UNAVAILABLE_Q).max(dim=3, keepdim=True)[1]
        # greedy_actions [bs, T, n_agents, 1]
        chosen_action_qvals = th.gather(mac_out[:, :-1], dim=3, index=data.actions).squeeze(3)  # [bs, T-1, n_agents]
        central_chosen = self._central_gather(central_out[:, :-1], data.actions)  # [bs, T-1, n_agents, embed]
        with th.no_grad():
            central_target_greedy = self._central_gather(target_central_out, greedy_actions)  # [bs, T, n_agents, embed]
            target_central_q = self._mix(self.target_central_mixer, central_target_greedy, states)  # [bs, T, 1]
            targets = build_td_lambda_targets(data.rewards, data.terminated, data.mask, target_central_q,
                                              self.args.n_agents, self.args.gamma, self.args.td_lambda)  # [bs, T-1, 1]
        q_tot = self._mix(self.mixer, chosen_action_qvals, states[:, :-1])  # [bs, T-1, 1]
        central_q = self._mix(self.central_mixer, central_chosen, states[:, :-1])  # [bs, T-1, 1]
        central_loss, _, _ = masked_squared_error(central_q, targets, data.mask, per_weight)
        with th.no_grad():
            weights = self._weights(q_tot - targets, data, greedy_actions, target_central_q, targets)  # [bs, T-1, 1]
        qmix_loss, masked_td_error, mask = masked_squared_error(q_tot, targets, data.mask, per_weight, half=False,
                                                                weights=weights)
        loss = self.args.qmix_loss * qmix_loss + self.args.central_loss * central_loss

        def stats() -> dict:
            return {**td_stats(loss, masked_td_error, q_tot, targets, mask, self.args.n_agents, "loss"),
                    "qmix_loss": qmix_loss.item(), "central_loss": central_loss.item(),
                    "w_to_use": (weights * mask).sum().item() / mask.sum().item()}

        return LossOutput(loss, stats, masked_td_error, mask, mac_out)

    def _central_gather(self, central_out: th.Tensor, actions: th.Tensor) -> th.Tensor:
        """The central outputs [b, t, n_agents, n_actions, embed] of actions [b, t, n_agents, 1]:
        [b, t, n_agents, embed]."""
        index = actions.unsqueeze(4).expand(*actions.shape, self.args.central_action_embed)  # [b, t, n_agents, 1, embed]
        return th.gather(central_out, 3, index).squeeze(3)

    def _weights(self, td_error: th.Tensor, data: Transitions, greedy_actions: th.Tensor,
                 target_central_q: th.Tensor, targets: th.Tensor) -> th.Tensor:
        """Weighted QMIX's weight of each transition [bs, T-1, 1]: 1 or w (see the module docstring)."""
        if self.args.hysteretic_qmix:  # OW-QMIX
            full = td_error < 0
        else:  # CW-QMIX
            is_greedy = (data.actions == greedy_actions[:, :-1]).all(dim=2)  # [bs, T-1, 1]
            full = is_greedy | (targets > target_central_q[:, :-1])
        return th.where(full, 1.0, self.args.w).to(td_error)

    def _gradient_stats(self) -> dict:
        return {"mixer_norm": _norm(self.mixer.parameters()), "agent_norm": _norm(self.mac.parameters())}

    def _update_targets(self) -> None:
        self.target_central_mac.load_state(self.central_mac)
        self.target_central_mixer.load_state_dict(self.central_mixer.state_dict())
        super()._update_targets()

    def cuda(self) -> None:
        super().cuda()
        for network in (self.central_mac, self.target_central_mac, self.central_mixer, self.target_central_mixer):
            network.cuda()

    def save_models(self, path: str) -> None:
        super().save_models(path)
        for folder, mac, mixer in ((path, self.central_mac, self.central_mixer),
                                   (os.path.join(path, TARGET_DIR), self.target_central_mac, self.target_central_mixer)):
            mac.save_models(folder)
            th.save(mixer.state_dict(), os.path.join(folder, CENTRAL_MIXER_FILE))

    def model_files(self) -> list:
        names = [self.central_mac.AGENT_FILE, CENTRAL_MIXER_FILE]
        return super().model_files() + names + [os.path.join(TARGET_DIR, name) for name in names]

    def load_models(self, path: str) -> None:
        """As QLearner's, with the central networks (their targets start as copies, as the others')."""
        super().load_models(path)
        for mac, mixer in ((self.central_mac, self.central_mixer), (self.target_central_mac, self.target_central_mixer)):
            mac.load_models(path)
            mixer.load_state_dict(th.load(os.path.join(path, CENTRAL_MIXER_FILE), map_location="cpu"))

    def load_target_models(self, path: str) -> None:
        super().load_target_models(path)
        target_path = os.path.join(path, TARGET_DIR)
        self.target_central_mac.load_models(target_path)
        self.target_central_mixer.load_state_dict(th.load(os.path.join(target_path, CENTRAL_MIXER_FILE),
                                                          map_location="cpu"))
