"""PyMARL2's NQLearner: (double) Q-learning with TD(lambda) targets for QMIX, VDN and IQL.

Life of a batch in ``train`` (T = batch.max_seq_length, the last step only bootstraps):
  batch fields          -> rewards/terminated/mask [bs, T-1, 1], actions [bs, T-1, n_agents, 1]
  online mac unroll     -> mac_out [bs, T, n_agents, n_actions]
  chosen actions        -> chosen_action_qvals [bs, T-1, n_agents]
  target mac unroll     -> target_mac_out [bs, T, n_agents, n_actions]
  double-Q evaluation   -> target_max_qvals [bs, T, n_agents]
  mixer (if any)        -> Q_tot [bs, T-1, 1] and target Q_tot [bs, T, 1]
  lambda returns        -> targets [bs, T-1, k], k = 1 with a mixer, n_agents without
  masked squared error  -> scalar loss
"""
import copy
from types import SimpleNamespace
from typing import Optional

import torch as th
from torch.optim import Adam, RMSprop

from components.episode_buffer import EpisodeBatch
from modules.mixers import REGISTRY as mixer_REGISTRY
from utils.rl_utils import build_q_lambda_targets, build_td_lambda_targets

OPTIMISERS = ("adam", "rmsprop")


class NQLearner:
    """Trains ``mac`` (and the mixer named by ``args.mixer``; None = independent Q-learning)."""

    def __init__(self, mac, scheme: dict, logger, args: SimpleNamespace):
        self.args = args
        self.mac = mac
        self.logger = logger
        self.params = list(mac.parameters())

        self.mixer = self._make_mixer(args)
        self.target_mixer = copy.deepcopy(self.mixer)
        if self.mixer is not None:
            self.params += list(self.mixer.parameters())
        self.optimiser = self._make_optimiser(args)

        # A deep copy duplicates the action selector too, but works for any controller.
        self.target_mac = copy.deepcopy(mac)
        self.last_target_update_episode = 0
        self.log_stats_t = -args.learner_log_interval - 1

    @staticmethod
    def _make_mixer(args: SimpleNamespace) -> Optional[th.nn.Module]:
        if args.mixer is None:
            return None
        if args.mixer not in mixer_REGISTRY:
            raise ValueError(f"unknown mixer '{args.mixer}'; known mixers: "
                             f"{', '.join(sorted(mixer_REGISTRY))} (or null for independent Q-learning)")
        return mixer_REGISTRY[args.mixer](args)

    def _make_optimiser(self, args: SimpleNamespace) -> th.optim.Optimizer:
        name = getattr(args, "optimizer", "rmsprop")
        if name == "adam":
            return Adam(params=self.params, lr=args.lr, weight_decay=getattr(args, "weight_decay", 0))
        if name == "rmsprop":
            return RMSprop(params=self.params, lr=args.lr, alpha=args.optim_alpha, eps=args.optim_eps)
        raise ValueError(f"unknown optimizer '{name}'; use one of: {', '.join(OPTIMISERS)}")

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int) -> None:
        """One gradient step on ``batch``; refresh the targets every target_update_interval episodes."""
        rewards = batch["reward"][:, :-1]  # [bs, T-1, 1]
        actions = batch["actions"][:, :-1]  # [bs, T-1, n_agents, 1]
        terminated = batch["terminated"][:, :-1].float()  # [bs, T-1, 1]
        mask = self._valid_step_mask(batch, terminated)  # [bs, T-1, 1]

        self.mac.agent.train()
        mac_out = self._unroll(self.mac, batch)  # [bs, T, n_agents, n_actions]
        chosen_action_qvals = th.gather(mac_out[:, :-1], dim=3, index=actions).squeeze(3)  # [bs, T-1, n_agents]

        with th.no_grad():
            targets = self._targets(batch, mac_out, rewards, terminated, mask)  # [bs, T-1, k]

        if self.mixer is not None:
            chosen_action_qvals = self.mixer(chosen_action_qvals, batch["state"][:, :-1])  # [bs, T-1, 1]

        td_error = chosen_action_qvals - targets  # [bs, T-1, k]
        mask = mask.expand_as(td_error)  # [bs, T-1, k]
        masked_td_error = td_error * mask
        loss = 0.5 * masked_td_error.pow(2).sum() / mask.sum()

        self.optimiser.zero_grad()
        loss.backward()
        grad_norm = th.nn.utils.clip_grad_norm_(self.params, self.args.grad_norm_clip)
        self.optimiser.step()

        if (episode_num - self.last_target_update_episode) / self.args.target_update_interval >= 1.0:
            self._update_targets()
            self.last_target_update_episode = episode_num

        if t_env - self.log_stats_t >= self.args.learner_log_interval:
            self._log_stats(t_env, loss, grad_norm, masked_td_error, chosen_action_qvals, targets, mask)
            self.log_stats_t = t_env

    @staticmethod
    def _valid_step_mask(batch: EpisodeBatch, terminated: th.Tensor) -> th.Tensor:
        """Filled transitions, minus those after the terminal one (the stored final observation)."""
        filled = batch["filled"][:, :-1].float()  # [bs, T-1, 1]
        after_terminal = th.cat([th.zeros_like(terminated[:, :1]), terminated[:, :-1]], dim=1)  # [bs, T-1, 1]
        return filled * (1 - after_terminal)

    @staticmethod
    def _unroll(mac, batch: EpisodeBatch) -> th.Tensor:
        """Run ``mac`` over the whole episode from a fresh hidden state: [bs, T, n_agents, n_actions]."""
        mac.init_hidden(batch.batch_size)
        return th.stack([mac.forward(batch, t=t) for t in range(batch.max_seq_length)], dim=1)

    def _targets(self, batch: EpisodeBatch, mac_out: th.Tensor, rewards: th.Tensor,
                 terminated: th.Tensor, mask: th.Tensor) -> th.Tensor:
        """Double-Q lambda-returns: online argmax over available actions, valued by the target nets."""
        self.target_mac.agent.train()
        target_mac_out = self._unroll(self.target_mac, batch)  # [bs, T, n_agents, n_actions]

        online_qs = mac_out.detach().clone()  # [bs, T, n_agents, n_actions]
        online_qs[batch["avail_actions"] == 0] = -float("inf")
        greedy_actions = online_qs.max(dim=3, keepdim=True)[1]  # [bs, T, n_agents, 1]
        target_max_qvals = th.gather(target_mac_out, 3, greedy_actions).squeeze(3)  # [bs, T, n_agents]
        target_max_qvals = self._mix_target(target_max_qvals, batch)  # [bs, T, k]

        if getattr(self.args, "q_lambda", False):
            taken_qvals = th.gather(target_mac_out, 3, batch["actions"]).squeeze(3)  # [bs, T, n_agents]
            taken_qvals = self._mix_target(taken_qvals, batch)  # [bs, T, k]
            return build_q_lambda_targets(rewards, terminated, mask, target_max_qvals, taken_qvals,
                                          self.args.gamma, self.args.td_lambda)
        return build_td_lambda_targets(rewards, terminated, mask, target_max_qvals,
                                       self.args.n_agents, self.args.gamma, self.args.td_lambda)

    def _mix_target(self, agent_qs: th.Tensor, batch: EpisodeBatch) -> th.Tensor:
        """[bs, T, n_agents] -> [bs, T, 1] through the target mixer; unchanged without a mixer."""
        if self.target_mixer is None:
            return agent_qs
        return self.target_mixer(agent_qs, batch["state"])

    def _log_stats(self, t_env: int, loss: th.Tensor, grad_norm: th.Tensor, masked_td_error: th.Tensor,
                   chosen_action_qvals: th.Tensor, targets: th.Tensor, mask: th.Tensor) -> None:
        """Means over valid entries; Q and target means are per agent (Q_tot / n_agents with a mixer)."""
        mask_elems = mask.sum().item()
        valid_steps = mask[..., 0].sum().item()
        per_agent = valid_steps * self.args.n_agents
        self.logger.log_stat("loss_td", loss.item(), t_env)
        self.logger.log_stat("grad_norm", grad_norm.item(), t_env)
        self.logger.log_stat("td_error_abs", masked_td_error.abs().sum().item() / mask_elems, t_env)
        self.logger.log_stat("q_taken_mean", (chosen_action_qvals * mask).sum().item() / per_agent, t_env)
        self.logger.log_stat("target_mean", (targets * mask).sum().item() / per_agent, t_env)

    def _update_targets(self) -> None:
        self.target_mac.load_state(self.mac)
        if self.mixer is not None:
            self.target_mixer.load_state_dict(self.mixer.state_dict())
        self.logger.console_logger.info("Updated target network")

    def cuda(self) -> None:
        self.mac.cuda()
        self.target_mac.cuda()
        if self.mixer is not None:
            self.mixer.cuda()
            self.target_mixer.cuda()

    def save_models(self, path: str) -> None:
        """Write the agent (via the mac), mixer.th and opt.th into directory ``path``."""
        self.mac.save_models(path)
        if self.mixer is not None:
            th.save(self.mixer.state_dict(), f"{path}/mixer.th")
        th.save(self.optimiser.state_dict(), f"{path}/opt.th")

    def load_models(self, path: str) -> None:
        """Load what save_models wrote; the target networks start as copies of the loaded ones."""
        self.mac.load_models(path)
        self.target_mac.load_models(path)
        if self.mixer is not None:
            mixer_state = th.load(f"{path}/mixer.th", map_location="cpu")
            self.mixer.load_state_dict(mixer_state)
            self.target_mixer.load_state_dict(mixer_state)
        self.optimiser.load_state_dict(th.load(f"{path}/opt.th", map_location="cpu"))
