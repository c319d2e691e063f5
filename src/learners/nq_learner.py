"""PyMARL2's NQLearner: (double) Q-learning with TD(lambda) targets for QMIX, VDN and IQL.

Life of a batch in ``train`` with the fused unroll (T = batch.max_seq_length, the last step only
bootstraps; e.g. SMAC corridor with qmix.yaml: bs 128, n_agents 6, n_actions 30, obs 156, state 282,
input 192, hidden 64, rows = bs*n_agents = 768):
  batch fields             -> rewards/terminated/mask [bs, T-1, 1], actions [bs, T-1, n_agents, 1] (as long)
  agent inputs, once       -> [obs_t, one-hot a_{t-1} (zeros at t=0), one-hot id] [bs, T, n_agents, input],
                              stored time-major (in bfloat16 when training in it) and shared by the online
                              and the target controller (mac.build_sequence_inputs)
  the controllers' fused pass (mac.forward_sequence_pair: the online one with gradients, the target one
  without):
    fc1 + ReLU, all steps  -> [T, bs, n_agents, hidden] per network, viewed as x [T, rows, hidden]
    GRUs (gru_sequence_pair) -> memory after each step [T, rows, hidden] in float32, chunk by chunk
                              (16 steps here): the chunk's input projections [16, rows, 3*hidden] in
                              one matmul per network, then per step W_hh h [2, rows, 3*hidden] for both
                              networks in one batched matmul and the gates; the online network's
                              backward factors [16, rows, 5*hidden] are kept
    (LayerNorm,) fc2       -> mac_out, target_mac_out [bs, T, n_agents, n_actions] (views of time-major)
  chosen actions           -> chosen_action_qvals [bs, T-1, n_agents]
  double-Q evaluation      -> online greedy action among the available ones [bs, T, n_agents, 1],
                              valued by the target nets: target_max_qvals [bs, T, n_agents]
  mixer (if any)           -> Q_tot [bs, T-1, 1] and target Q_tot [bs, T, 1]; the hypernetworks'
                              state layers as one matmul [bs*T, 282] @ [282, 192], the mixing in float32
  lambda returns           -> targets [bs, T-1, k] (k = 1 with a mixer, n_agents without), one
                              [T-1, T] discount-matrix product
  masked squared error     -> scalar loss; backward (the GRU's: per step one small matmul, per chunk
                              the weight gradients in three big ones), gradient clipping, optimiser step

train_unroll "stepwise" runs mac.forward once per step instead, as the runner does while acting:
the straightforward reference the fused pass is tested against (same values up to float rounding).
train_precision "bfloat16" (what "auto" picks on a CPU with native bfloat16 instructions) runs the
networks under bfloat16 autocast: their matmuls in bfloat16; the GRU's memory and gates, the QMIX
mixing, the Q-values, targets and loss in float32. "float32" is PyMARL2's arithmetic throughout.
Speed (bench/bench_train_step.py: 128 corridor episodes of 100 steps, 2-core AMD EPYC with
avx512_bf16; seconds per train step at 2 / 1 torch threads): step-wise float32 0.24 / 0.38-0.40,
fused float32 0.22 / 0.37-0.39 (float32 is bound by matmul arithmetic, ~28 GFLOP a step), fused
bfloat16 0.12-0.13 / 0.18-0.19, i.e. 1.96-2.10x (median 2.05x) / 2.16-2.26x the step-wise float32
step timed in the same run. The losses of bfloat16 training stay within a few 1e-3 of float32's over a batch.
"""
import copy
import os
from types import SimpleNamespace
from typing import Optional

import torch as th
from torch.optim import Adam, RMSprop

from components.episode_buffer import EpisodeBatch
from modules.mixers import REGISTRY as mixer_REGISTRY
from utils.rl_utils import build_q_lambda_targets, build_td_lambda_targets
from utils.th_utils import resolve_train_precision

OPTIMISERS = ("adam", "rmsprop")
UNROLLS = ("fused", "stepwise")  # train_unroll: how the controllers run over the batch's episodes
TARGET_DIR = "target"  # sub-folder of a checkpoint with the target networks
# Added to the Q-values of unavailable actions before the greedy argmax: far below any Q-value (float32's
# lowest is -3.4e38), the same choice as masking them with -inf, and several times faster than masked_fill.
UNAVAILABLE_OFFSET = -3e38


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
        self.unroll = getattr(args, "train_unroll", "fused")
        if self.unroll not in UNROLLS:
            raise ValueError(f"unknown train_unroll '{self.unroll}'; use one of: {', '.join(UNROLLS)}")
        # Args without the key (hand-built ones, PyMARL2 configs) train in float32; default.yaml says auto.
        precision, why = resolve_train_precision(getattr(args, "train_precision", "float32"), args.device)
        self.bf16 = precision == "bfloat16"
        logger.console_logger.info(f"Training step matmuls in {precision} ({why})")
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
        # foreach: one multi-tensor update instead of a loop over the parameters (the same values).
        if name == "adam":
            return Adam(params=self.params, lr=args.lr, weight_decay=getattr(args, "weight_decay", 0), foreach=True)
        if name == "rmsprop":
            return RMSprop(params=self.params, lr=args.lr, alpha=args.optim_alpha, eps=args.optim_eps, foreach=True)
        raise ValueError(f"unknown optimizer '{name}'; use one of: {', '.join(OPTIMISERS)}")

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int) -> None:
        """One gradient step on ``batch``; refresh the targets every target_update_interval episodes."""
        rewards = batch["reward"][:, :-1]  # [bs, T-1, 1]
        actions = batch["actions"][:, :-1].long()  # [bs, T-1, n_agents, 1]
        terminated = batch["terminated"][:, :-1].float()  # [bs, T-1, 1]
        mask = self._valid_step_mask(batch, terminated)  # [bs, T-1, 1]

        self.mac.agent.train()
        self.target_mac.agent.train()
        mac_out, target_mac_out = self._unroll(batch)  # [bs, T, n_agents, n_actions] each
        chosen_action_qvals = th.gather(mac_out[:, :-1], dim=3, index=actions).squeeze(3)  # [bs, T-1, n_agents]

        with th.no_grad():
            targets = self._targets(batch, mac_out, target_mac_out, rewards, terminated, mask)  # [bs, T-1, k]

        if self.mixer is not None:
            chosen_action_qvals = self._mix(self.mixer, chosen_action_qvals, batch["state"][:, :-1])  # [bs, T-1, 1]

        td_error = chosen_action_qvals - targets  # [bs, T-1, k]
        mask = mask.expand_as(td_error)  # [bs, T-1, k]
        masked_td_error = td_error * mask
        loss = 0.5 * masked_td_error.pow(2).sum() / mask.sum()
        _check_finite("loss", loss, t_env)

        self.optimiser.zero_grad()
        loss.backward()
        grad_norm = th.nn.utils.clip_grad_norm_(self.params, self.args.grad_norm_clip)
        _check_finite("gradient norm", grad_norm, t_env)  # a step with it would make every weight NaN
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

    def _unroll(self, batch: EpisodeBatch) -> tuple[th.Tensor, th.Tensor]:
        """Q-values of the online controller (with gradients) and of the target controller (without)
        over the whole episodes from fresh memory: two [bs, T, n_agents, n_actions], in float32."""
        with self._autocast(batch):
            if self.unroll == "stepwise":
                mac_out = unroll_stepwise(self.mac, batch)
                with th.no_grad():
                    target_mac_out = unroll_stepwise(self.target_mac, batch)
            else:
                mac_out, target_mac_out = self.mac.forward_sequence_pair(self.target_mac, batch)
        return mac_out.float(), target_mac_out.float()

    def _mix(self, mixer: th.nn.Module, agent_qs: th.Tensor, states: th.Tensor) -> th.Tensor:
        """[bs, T, n_agents] -> Q_tot [bs, T, 1] in float32."""
        with self._autocast(states):
            return mixer(agent_qs, states)

    def _autocast(self, on: EpisodeBatch | th.Tensor):
        """bfloat16 autocast on the device of `on` when training in bfloat16 (networks only: the
        targets and the loss stay in float32), else a no-op context."""
        return th.autocast(device_type=th.device(on.device).type, dtype=th.bfloat16, enabled=self.bf16)

    def _targets(self, batch: EpisodeBatch, mac_out: th.Tensor, target_mac_out: th.Tensor, rewards: th.Tensor,
                 terminated: th.Tensor, mask: th.Tensor) -> th.Tensor:
        """Double-Q lambda-returns: online argmax over available actions, valued by the target nets."""
        unavailable = (batch["avail_actions"] == 0).to(mac_out.dtype)  # [bs, T, n_agents, n_actions]
        online_qs = th.add(mac_out.detach(), unavailable, alpha=UNAVAILABLE_OFFSET)  # [bs, T, n_agents, n_actions]
        greedy_actions = online_qs.max(dim=3, keepdim=True)[1]  # [bs, T, n_agents, 1]
        target_max_qvals = th.gather(target_mac_out, 3, greedy_actions).squeeze(3)  # [bs, T, n_agents]
        target_max_qvals = self._mix_target(target_max_qvals, batch)  # [bs, T, k]

        if getattr(self.args, "q_lambda", False):
            taken_qvals = th.gather(target_mac_out, 3, batch["actions"].long()).squeeze(3)  # [bs, T, n_agents]
            taken_qvals = self._mix_target(taken_qvals, batch)  # [bs, T, k]
            return build_q_lambda_targets(rewards, terminated, mask, target_max_qvals, taken_qvals,
                                          self.args.gamma, self.args.td_lambda)
        return build_td_lambda_targets(rewards, terminated, mask, target_max_qvals,
                                       self.args.n_agents, self.args.gamma, self.args.td_lambda)

    def _mix_target(self, agent_qs: th.Tensor, batch: EpisodeBatch) -> th.Tensor:
        """[bs, T, n_agents] -> [bs, T, 1] through the target mixer; unchanged without a mixer."""
        if self.target_mixer is None:
            return agent_qs
        return self._mix(self.target_mixer, agent_qs, batch["state"])

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
        """Load the networks and optimiser that save_models wrote; the target networks start as copies
        of the loaded networks, as in PyMARL2 (load_target_models restores the saved ones)."""
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
        return {"last_target_update_episode": self.last_target_update_episode, "log_stats_t": self.log_stats_t}

    def load_state_dict(self, state: dict) -> None:
        self.last_target_update_episode = state["last_target_update_episode"]
        self.log_stats_t = state["log_stats_t"]
