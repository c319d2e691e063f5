"""PyMARL2's QLearner (``learner: q_learner``): independent or mixed Q-learning with one-step targets.

The loss of one train step, with Q_t the online network's Q-values of the actions taken, Q'_t the
target networks', and Q_tot / Q'_tot their mixes (the agents' own Q-values without a mixer):

    y_t  = r_t + gamma * (1 - d_t) * Q'_tot(s_{t+1}, a*_{t+1})
    a*   = argmax over the available actions of the online Q at t+1 (double_q; the target Q's
           own maximum with double_q False)
    loss = 0.5 * sum over valid steps of (Q_tot(s_t, a_t) - y_t)^2 / number of valid steps

This class also holds what PyMARL2's q_learner and nq_learner share: the unroll of the online and
target controllers over whole episodes (fused, or step-wise as the reference), the mixer, the
optimiser, gradient clipping, the hard target update every target_update_interval episodes,
prioritized replay's importance weights and priorities, logging, saving and loading.
``NQLearner`` (nq_learner.py) only swaps the targets for TD(lambda) and the mixer for nmix's.

With ``mixer: qmix`` this learner builds PyMARL's original QMIX mixer (``qmix_original``), as
PyMARL2's q_learner does; nq_learner builds PyMARL2's rewritten one (``qmix``).

Life of a batch in ``train`` (T = batch.max_seq_length: T - 1 transitions and the final step):
  batch fields        -> rewards/terminated/mask [bs, T-1, 1], actions [bs, T-1, n_agents, 1] (long)
  _unroll             -> mac_out, target_mac_out [bs, T, n_agents, n_actions] (BasicMAC.forward_sequence_pair,
                         see rnn_agent.py and gru_sequence.py for the fused pass)
  chosen actions      -> chosen_action_qvals [bs, T-1, n_agents]
  _targets            -> targets [bs, T-1, k], k = 1 with a mixer, n_agents without (no gradient)
  mixer (if any)      -> Q_tot [bs, T-1, 1]
  masked squared error (times the importance weight [bs] with prioritized replay) -> scalar loss;
  backward, gradient clipping at grad_norm_clip, optimiser step
"""
import copy
import os
from types import SimpleNamespace
from typing import Callable, NamedTuple, Optional

import torch as th
from torch.optim import Adam, RMSprop

from components.episode_buffer import EpisodeBatch
from modules.mixers import REGISTRY as mixer_REGISTRY
from utils.th_utils import resolve_train_precision

from .matrix_game_table import joint_action_table

OPTIMISERS = ("adam", "rmsprop")
UNROLLS = ("fused", "stepwise")  # train_unroll: how the controllers run over the batch's episodes
TARGET_DIR = "target"  # sub-folder of a checkpoint with the target networks
# Added to the Q-values of unavailable actions before the greedy argmax: far below any Q-value (float32's
# lowest is -3.4e38), the same choice as masking them with -inf, and several times faster than masked_fill.
UNAVAILABLE_OFFSET = -3e38
# PyMARL2's value for unavailable actions where their Q-values are used, not only compared (the maximum
# of the target Q-values without double Q): finite, so that masked steps stay finite through a mixer.
UNAVAILABLE_Q = -9999999.0
PRIORITY_EPSILON = 1e-5  # keeps return priorities' range division finite (PyMARL2's value)


class NonFiniteLoss(FloatingPointError):
    """Training produced NaN or inf; raised before the optimiser step, so the networks stay as they were."""


def _check_finite(what: str, value: th.Tensor, t_env: int) -> None:
    if not th.isfinite(value).all():
        raise NonFiniteLoss(f"the {what} became {value.item()} at t_env {t_env}: training stopped, the networks "
                            f"were not updated; try a smaller lr, grad_norm_clip or reward scale")


def unroll_stepwise(mac, batch: EpisodeBatch) -> th.Tensor:
    """The reference unroll: ``mac.forward`` once per step from fresh memory, as the runner acts;
    [bs, T, n_agents, n_actions]."""
    mac.init_hidden(batch.batch_size)
    return th.stack([mac.forward(batch, t=t) for t in range(batch.max_seq_length)], dim=1)


class Transitions(NamedTuple):
    """A batch's per-transition quantities: rewards, terminated and the valid-step mask [bs, T-1, 1],
    the actions taken [bs, T-1, n_agents, 1] (long)."""
    rewards: th.Tensor
    actions: th.Tensor
    terminated: th.Tensor
    mask: th.Tensor


def valid_step_mask(batch: EpisodeBatch, terminated: th.Tensor) -> th.Tensor:
    """Filled transitions, minus those after the terminal one (the stored final observation): [bs, T-1, 1]."""
    filled = batch["filled"][:, :-1].float()  # [bs, T-1, 1]
    after_terminal = th.cat([th.zeros_like(terminated[:, :1]), terminated[:, :-1]], dim=1)  # [bs, T-1, 1]
    return filled * (1 - after_terminal)


def batch_transitions(batch: EpisodeBatch) -> Transitions:
    """The rewards, actions, terminated flags and valid-step mask of a batch's T-1 transitions."""
    rewards = batch["reward"][:, :-1]  # [bs, T-1, 1]
    actions = batch["actions"][:, :-1].long()  # [bs, T-1, n_agents, 1]
    terminated = batch["terminated"][:, :-1].float()  # [bs, T-1, 1]
    return Transitions(rewards, actions, terminated, valid_step_mask(batch, terminated))


class LossOutput(NamedTuple):
    """A learner's loss, a function giving its stats to log (called only when they are logged), the
    masked TD error [bs, T-1, k] with its mask, from which prioritized replay takes priorities, and the
    agents' Q-values [bs, T, n_agents, n_actions] (the matrix game's table shows them)."""
    loss: th.Tensor
    stats: Callable[[], dict]
    masked_td_error: th.Tensor
    mask: th.Tensor
    mac_out: th.Tensor


def masked_squared_error(values: th.Tensor, targets: th.Tensor, mask: th.Tensor,
                         per_weight: th.Tensor | None = None, half: bool = True,
                         weights: th.Tensor | None = None) -> tuple:
    """(loss, masked TD error, mask) of values against targets [bs, T-1, k]: the (half, PyMARL2's) squared
    error summed over valid entries (each weighted by `weights` [bs, T-1, k] and its episode's per_weight
    [bs]) over their number."""
    td_error = values - targets  # [bs, T-1, k]
    mask = mask.expand_as(td_error)  # [bs, T-1, k]
    masked_td_error = td_error * mask
    squared_error = masked_td_error.pow(2) * (0.5 if half else 1.0)  # [bs, T-1, k]
    if weights is not None:
        squared_error = squared_error * weights
    if per_weight is not None:
        squared_error = squared_error * per_weight.to(squared_error).view(-1, 1, 1)
    return squared_error.sum() / mask.sum(), masked_td_error, mask


def td_stats(loss: th.Tensor, masked_td_error: th.Tensor, chosen: th.Tensor, targets: th.Tensor,
             mask: th.Tensor, n_agents: int, loss_name: str = "loss_td") -> dict:
    """PyMARL2's learner stats: the loss, the mean |TD error| over valid entries, and the chosen Q and
    target means per agent (Q_tot / n_agents with a mixer)."""
    per_agent = mask[..., 0].sum().item() * n_agents
    return {loss_name: loss.item(), "td_error_abs": masked_td_error.abs().sum().item() / mask.sum().item(),
            "q_taken_mean": (chosen * mask).sum().item() / per_agent,
            "target_mean": (targets * mask).sum().item() / per_agent}


class QLearner:
    """Trains ``mac`` (and the mixer named by ``args.mixer``; None = independent Q-learning)."""

    # Mixer names this learner maps to another registry entry (PyMARL2's q_learner builds its
    # original QMixer for "qmix").
    MIXER_ALIASES = {"qmix": "qmix_original"}
    # The mixers this learner trains: those that mix [b, t, n_agents] Q-values with the state.
    MIXERS = ("qmix", "qmix_original", "vdn", "qatten")
    LOSS_STAT = "loss_td"  # the loss's name among the logged stats (PyMARL2's)
    HALF_SQUARED_ERROR = True  # the loss is half the mean squared TD error (PyMARL2's)

    def __init__(self, mac, scheme: dict, logger, args: SimpleNamespace):
        self.args = args
        self.mac = mac
        self.logger = logger
        self.params = list(mac.parameters())

        self.mixer = self._make_mixer(args)
        self.target_mixer = copy.deepcopy(self.mixer)
        if self.mixer is not None:
            self.params += list(self.mixer.parameters())
        # A deep copy duplicates the action selector too, but works for any controller.
        self.target_mac = copy.deepcopy(mac)
        self.params += self._extra_networks(scheme, args)
        self.optimiser = self._make_optimiser(args)
        self.unroll = getattr(args, "train_unroll", "fused")
        if self.unroll not in UNROLLS:
            raise ValueError(f"unknown train_unroll '{self.unroll}'; use one of: {', '.join(UNROLLS)}")
        # main.py resolves train_precision into config.json; hand-built args without it train in float32.
        precision, why = resolve_train_precision(getattr(args, "train_precision", "float32"), args.device)
        self.bf16 = precision == "bfloat16"
        logger.console_logger.info(f"Training step matmuls in {precision} ({why})")
        self.last_target_update_episode = 0
        self.log_stats_t = -args.learner_log_interval - 1
        # Running range of episode returns, which return_priority maps to [0, 1].
        self.priority_min, self.priority_max = float("inf"), float("-inf")

    def _make_mixer(self, args: SimpleNamespace) -> Optional[th.nn.Module]:
        if args.mixer is None:
            return None
        if args.mixer not in self.MIXERS:
            known = f"{getattr(args, 'learner', type(self).__name__)} trains the mixers {', '.join(self.MIXERS)}"
            if args.mixer in mixer_REGISTRY:
                raise ValueError(f"mixer '{args.mixer}' needs another learner: {known} (see the algorithm YAMLs)")
            raise ValueError(f"unknown mixer '{args.mixer}'; {known}")
        return mixer_REGISTRY[self.MIXER_ALIASES.get(args.mixer, args.mixer)](args)

    def _extra_networks(self, scheme: dict, args: SimpleNamespace) -> list:
        """Build a subclass's further networks (and their targets); returns their trained parameters."""
        return []

    def _make_optimiser(self, args: SimpleNamespace) -> th.optim.Optimizer:
        name = getattr(args, "optimizer", "rmsprop")
        # foreach: one multi-tensor update instead of a loop over the parameters (the same values).
        if name == "adam":
            return Adam(params=self.params, lr=args.lr, weight_decay=getattr(args, "weight_decay", 0), foreach=True)
        if name == "rmsprop":
            return RMSprop(params=self.params, lr=args.lr, alpha=args.optim_alpha, eps=args.optim_eps, foreach=True)
        raise ValueError(f"unknown optimizer '{name}'; use one of: {', '.join(OPTIMISERS)}")

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int,
              per_weight: th.Tensor | None = None) -> dict:
        """One gradient step on ``batch``; refresh the targets every target_update_interval episodes.

        With prioritized replay `per_weight` holds the episodes' importance weights [bs], and the
        returned dict their new priorities as "td_errors_abs" [bs] (PyMARL2's key); else it is empty."""
        data = self._transitions(batch)
        self.mac.agent.train()
        self.target_mac.agent.train()
        out = self._loss(batch, data, per_weight)
        _check_finite("loss", out.loss, t_env)
        self.optimiser.zero_grad()
        out.loss.backward()
        logging = t_env - self.log_stats_t >= self.args.learner_log_interval
        gradient_stats = self._gradient_stats() if logging else {}  # before clipping changes the gradients
        grad_norm = th.nn.utils.clip_grad_norm_(self.params, self.args.grad_norm_clip)
        _check_finite("gradient norm", grad_norm, t_env)  # a step with it would make every weight NaN
        self.optimiser.step()

        self._follow_targets(episode_num)
        if logging:
            if self.args.env == "one_step_matrix_game":
                self._log_matrix(batch, out.mac_out)
            for key, value in {**out.stats(), **gradient_stats, "grad_norm": grad_norm.item()}.items():
                self.logger.log_stat(key, value, t_env)
            self.log_stats_t = t_env
        if per_weight is None:
            return {}
        return {"td_errors_abs": self._priorities(data.rewards, out.masked_td_error.detach(), out.mask)}

    def _follow_targets(self, episode_num: int) -> None:
        """After each optimiser step: the hard target update once target_update_interval episodes have passed."""
        if (episode_num - self.last_target_update_episode) / self.args.target_update_interval >= 1.0:
            self._update_targets()
            self.last_target_update_episode = episode_num

    def _gradient_stats(self) -> dict:
        """Stats of the gradients before clipping, logged with the others (none here)."""
        return {}

    def _transitions(self, batch: EpisodeBatch) -> "Transitions":
        return batch_transitions(batch)

    def _loss(self, batch: EpisodeBatch, data: "Transitions", per_weight: th.Tensor | None) -> "LossOutput":
        """The masked squared TD error of the (mixed) chosen-action Q-values against _targets."""
        mac_out, target_mac_out = self._unroll(batch)  # [bs, T, n_agents, n_actions] each
        chosen_action_qvals = th.gather(mac_out[:, :-1], dim=3, index=data.actions).squeeze(3)  # [bs, T-1, n_agents]
        with th.no_grad():
            targets = self._targets(batch, mac_out, target_mac_out, data)  # [bs, T-1, k]
        if self.mixer is not None:
            chosen_action_qvals = self._mix(self.mixer, chosen_action_qvals, batch["state"][:, :-1])  # [bs, T-1, 1]
        loss, masked_td_error, mask = masked_squared_error(chosen_action_qvals, targets, data.mask, per_weight,
                                                           half=self.HALF_SQUARED_ERROR)

        def stats() -> dict:
            return td_stats(loss, masked_td_error, chosen_action_qvals, targets, mask, self.args.n_agents,
                            loss_name=self.LOSS_STAT)

        return LossOutput(loss, stats, masked_td_error, mask, mac_out)

    def _unroll(self, batch: EpisodeBatch, mac=None, target_mac=None) -> tuple[th.Tensor, th.Tensor]:
        """Q-values of the online controller (with gradients) and of the target controller (without)
        over the whole episodes from fresh memory: two [bs, T, n_agents, n_actions], in float32.
        The learner's mac and target_mac unless others are given."""
        mac, target_mac = mac or self.mac, target_mac or self.target_mac
        with self._autocast(batch):
            if self.unroll == "stepwise":
                mac_out = unroll_stepwise(mac, batch)
                with th.no_grad():
                    target_mac_out = unroll_stepwise(target_mac, batch)
            else:
                mac_out, target_mac_out = mac.forward_sequence_pair(target_mac, batch)
        return mac_out.float(), target_mac_out.float()

    def _mix(self, mixer: th.nn.Module, agent_qs: th.Tensor, states: th.Tensor) -> th.Tensor:
        """[bs, T, n_agents] -> Q_tot [bs, T, 1] in float32."""
        with self._autocast(states):
            return mixer(agent_qs, states)

    def _autocast(self, on: EpisodeBatch | th.Tensor):
        """bfloat16 autocast on the device of `on` when training in bfloat16 (networks only: the
        targets and the loss stay in float32), else a no-op context."""
        return th.autocast(device_type=th.device(on.device).type, dtype=th.bfloat16, enabled=self.bf16)

    def _greedy_target_qvals(self, batch: EpisodeBatch, mac_out: th.Tensor, target_mac_out: th.Tensor,
                             start: int) -> th.Tensor:
        """The target networks' Q-value of the greedy action at steps start..T-1, [bs, T - start, n_agents]:
        with double_q the online networks choose among the available actions, else the target's maximum."""
        unavailable = batch["avail_actions"][:, start:] == 0  # [bs, T - start, n_agents, n_actions]
        target_qs = target_mac_out[:, start:]
        if not getattr(self.args, "double_q", True):
            return target_qs.masked_fill(unavailable, UNAVAILABLE_Q).max(dim=3)[0]
        online_qs = th.add(mac_out[:, start:].detach(), unavailable.to(mac_out.dtype), alpha=UNAVAILABLE_OFFSET)
        greedy_actions = online_qs.max(dim=3, keepdim=True)[1]  # [bs, T - start, n_agents, 1]
        return th.gather(target_qs, 3, greedy_actions).squeeze(3)

    def _targets(self, batch: EpisodeBatch, mac_out: th.Tensor, target_mac_out: th.Tensor,
                 data: "Transitions") -> th.Tensor:
        """One-step targets r_t + gamma * (1 - d_t) * (mixed) greedy target Q at t+1: [bs, T-1, k]."""
        target_max_qvals = self._greedy_target_qvals(batch, mac_out, target_mac_out, start=1)  # [bs, T-1, n_agents]
        target_max_qvals = self._mix_target(target_max_qvals, batch["state"][:, 1:])  # [bs, T-1, k]
        return data.rewards + self.args.gamma * (1 - data.terminated) * target_max_qvals

    def _mix_target(self, agent_qs: th.Tensor, states: th.Tensor) -> th.Tensor:
        """[bs, T', n_agents] -> [bs, T', 1] through the target mixer; unchanged without a mixer."""
        if self.target_mixer is None:
            return agent_qs
        return self._mix(self.target_mixer, agent_qs, states)

    def _priorities(self, rewards: th.Tensor, masked_td_error: th.Tensor, mask: th.Tensor) -> th.Tensor:
        """Prioritized replay's new priority of each episode [bs], as PyMARL2's nq_learner computes it:
        the summed |TD error| over its valid steps / sqrt(their number), or with return_priority its
        return, mapped to [0, 1] by the range of returns seen so far."""
        if getattr(self.args, "return_priority", False):
            returns = rewards.sum(dim=(1, 2)).cpu()  # [bs]
            self.priority_max = max(returns.max().item(), self.priority_max)
            self.priority_min = min(returns.min().item(), self.priority_min)
            return (returns - self.priority_min) / (self.priority_max - self.priority_min + PRIORITY_EPSILON)
        return (masked_td_error.abs().sum(dim=(1, 2)) / mask.sum(dim=(1, 2)).sqrt()).cpu()  # [bs]

    def _log_matrix(self, batch: EpisodeBatch, mac_out: th.Tensor) -> None:
        """The one-step matrix game's learned payoffs, as PyMARL2's print_matrix_status prints them:
        Q_tot of every joint action at the first step (mean over the batch) and each agent's mean
        Q-values over the batch's steps."""
        with th.no_grad():
            table = joint_action_table(mac_out, batch["state"], self._joint_value())
        self.logger.console_logger.info(table)

    def _joint_value(self) -> Callable | None:
        """The online joint value of given joint actions for the matrix game's table: a function of
        the agents' Q-values [b, t, n_agents], states [b, t, state] and actions [b, t, n_agents, 1];
        None without a mixer."""
        if self.mixer is None:
            return None
        return lambda agent_qs, states, actions: self._mix(self.mixer, agent_qs, states)

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
        """Write the agent (via the mac), mixer.th and opt.th into directory ``path``, and the target
        networks as target/agent.th and target/mixer.th."""
        self.mac.save_models(path)
        if self.mixer is not None:
            th.save(self.mixer.state_dict(), os.path.join(path, "mixer.th"))
        th.save(self.optimiser.state_dict(), os.path.join(path, "opt.th"))
        target_path = os.path.join(path, TARGET_DIR)
        os.makedirs(target_path, exist_ok=True)
        self.target_mac.save_models(target_path)
        if self.target_mixer is not None:
            th.save(self.target_mixer.state_dict(), os.path.join(target_path, "mixer.th"))

    def model_files(self) -> list:
        """The files save_models writes, relative to its folder."""
        names = ["agent.th", "mixer.th"] if self.mixer is not None else ["agent.th"]
        return names + ["opt.th"] + [os.path.join(TARGET_DIR, name) for name in names]

    def load_models(self, path: str) -> None:
        """Load the networks and optimiser that save_models wrote. The target controller starts as a copy
        of the loaded agent, as in PyMARL2; the target mixer does too here (PyMARL2 leaves it at its
        initial weights); load_target_models restores the saved target networks instead."""
        self.mac.load_models(path)
        self.target_mac.load_models(path)
        if self.mixer is not None:
            mixer_state = th.load(os.path.join(path, "mixer.th"), map_location="cpu")
            self.mixer.load_state_dict(mixer_state)
            self.target_mixer.load_state_dict(mixer_state)
        self.optimiser.load_state_dict(th.load(os.path.join(path, "opt.th"), map_location="cpu"))

    def load_target_models(self, path: str) -> None:
        """Load the target networks saved by save_models into `path`/target (to resume training exactly)."""
        target_path = os.path.join(path, TARGET_DIR)
        self.target_mac.load_models(target_path)
        if self.target_mixer is not None:
            self.target_mixer.load_state_dict(th.load(os.path.join(target_path, "mixer.th"), map_location="cpu"))

    def state_dict(self) -> dict:
        """The learner's counters (the networks and optimiser are in the files of save_models)."""
        return {"last_target_update_episode": self.last_target_update_episode, "log_stats_t": self.log_stats_t,
                "priority_min": self.priority_min, "priority_max": self.priority_max}

    def load_state_dict(self, state: dict) -> None:
        self.last_target_update_episode = state["last_target_update_episode"]
        self.log_stats_t = state["log_stats_t"]
        # Checkpoints saved before prioritized replay existed hold no return range.
        self.priority_min = state.get("priority_min", float("inf"))
        self.priority_max = state.get("priority_max", float("-inf"))
