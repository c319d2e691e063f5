"""What PyMARL2's policy-gradient learners (coma_learner, ppo_learner, policy_gradient_v2, lica_learner,
offpg_learner, fmac_learner) share here: the unroll of the policy controller over whole episodes, optimiser steps
with gradient clipping and finiteness checks, the logging schedule, and checkpoints of every network
and optimiser (with the target networks apart, so that a resumed run continues exactly).

A subclass lists its networks in ``networks`` (file name -> module, saved beside the controller's
agent.th), its target networks in ``target_networks`` (saved under target/ with the same names) and
its optimisers in ``optimisers`` (file name -> optimiser), and its counters in ``COUNTERS``.
"""
import copy
import os
from types import SimpleNamespace

import torch as th
from torch.optim import Adam

from components.episode_buffer import EpisodeBatch

from .q_learner import TARGET_DIR, UNROLLS, _check_finite


def unroll_policy(mac, batch: EpisodeBatch, stepwise: bool = False):
    """The controller's outputs at every stored step from fresh memory: policies [bs, T, n_agents,
    n_actions] (a tuple of such tensors for controllers that also output values). In one fused pass,
    or with `stepwise` one forward call per step, as while acting (the same values)."""
    if not stepwise:
        return mac.forward_sequence(batch)
    mac.init_hidden(batch.batch_size)
    steps = [mac.forward(batch, t=t) for t in range(batch.max_seq_length)]
    if isinstance(steps[0], tuple):
        return tuple(th.stack(parts, dim=1) for parts in zip(*steps))
    return th.stack(steps, dim=1)


def masked_mean(values: th.Tensor, mask: th.Tensor) -> th.Tensor:
    """The mean of `values` over the entries where `mask` (broadcast to its shape) is 1."""
    mask = mask.expand_as(values)
    return (values * mask).sum() / mask.sum()


def taken(values: th.Tensor, actions: th.Tensor) -> th.Tensor:
    """values [..., n_actions] at actions [..., 1] (long) -> [...]."""
    return th.gather(values, dim=-1, index=actions).squeeze(-1)


def entropy(policies: th.Tensor) -> th.Tensor:
    """Entropy of policies [..., n_actions] -> [...]. Zero probabilities (unavailable actions) add 0, and
    their log is clamped as torch's Categorical clamps it, so that the gradient stays finite."""
    log_policies = th.log(policies.clamp(min=th.finfo(policies.dtype).tiny))
    return -(policies * log_policies).sum(-1)


def adaptive_entropy_loss(value: th.Tensor, mean_entropy: th.Tensor, entropy_coef: float) -> th.Tensor:
    """The actor loss of LICA and RIIT, -Q - (entropy_coef / H) H, from the masked means of the critic's value
    of the policies Q and of their entropy H; the divisor is H's value (no gradient), so the entropy term's
    gradient has the size entropy_coef whatever H is. With H exactly 0 (every agent left with one available
    action) the term is left out, where PyMARL2 divides by zero."""
    entropy_value = mean_entropy.item()
    ratio = entropy_coef / entropy_value if entropy_value > 0 else 0.0
    return -value - ratio * mean_entropy


class PolicyLearner:
    """The shared part of the policy-gradient learners; subclasses implement ``train``."""

    COUNTERS = ("log_stats_t",)

    def __init__(self, mac, logger, args: SimpleNamespace):
        self.args = args
        self.mac = mac
        self.logger = logger
        self.n_agents = args.n_agents
        self.n_actions = args.n_actions
        self.log_stats_t = -args.learner_log_interval - 1
        self.networks, self.target_networks, self.optimisers = {}, {}, {}
        unroll = getattr(args, "train_unroll", "fused")
        if unroll not in UNROLLS:
            raise ValueError(f"unknown train_unroll '{unroll}'; use one of: {', '.join(UNROLLS)}")
        self.stepwise = unroll == "stepwise"
        if getattr(args, "use_per", False):
            raise ValueError(f"use_per: prioritized replay needs a value-based learner (nq_learner or q_learner), "
                             f"not {args.learner}")
        if getattr(args, "train_precision", "float32") != "float32":
            logger.console_logger.warning(f"{args.learner} trains in float32: train_precision="
                                          f"{args.train_precision} applies to the value-based learners only")

    def _add_critic(self, critic: th.nn.Module, critic_lr: float | None = None,
                    trained_with: th.nn.Module | None = None) -> None:
        """COMA's, LICA's and EPyMARL's actor-critic set-up: `critic` with a target copy, Adam for the
        agents (lr) and for the critic (critic_lr unless given; with `trained_with`, a network the critic's
        step trains too: one optimiser, one clipped gradient), all saved; the subclass lists
        critic_training_steps and last_target_update_step in COUNTERS."""
        self.critic = critic
        self.target_critic = copy.deepcopy(critic)
        self.agent_params = list(self.mac.parameters())
        self.critic_params = list(critic.parameters()) + (list(trained_with.parameters()) if trained_with else [])
        self.agent_optimiser = Adam(params=self.agent_params, lr=self.args.lr)
        self.critic_optimiser = Adam(params=self.critic_params, lr=critic_lr or self.args.critic_lr)
        self.networks = {"critic.th": self.critic}
        self.target_networks = {"critic.th": self.target_critic}
        self.optimisers = {"agent_opt.th": self.agent_optimiser, "critic_opt.th": self.critic_optimiser}
        self.critic_training_steps = 0
        self.last_target_update_step = 0

    def _policies(self, batch: EpisodeBatch, inputs: th.Tensor | None = None):
        """The controller's outputs over the batch (see unroll_policy), with gradients. A learner that passes
        over one batch several times (PPO's epochs) builds the controller's inputs once
        (mac.build_sequence_inputs, [bs, T, n_agents, input]) and passes them here; stepwise ignores them."""
        self.mac.agent.train()
        if inputs is not None and not self.stepwise:
            return self.mac.forward_inputs(inputs, batch["avail_actions"])
        return unroll_policy(self.mac, batch, self.stepwise)

    def _optimise(self, optimiser: th.optim.Optimizer | tuple, params: list, loss: th.Tensor,
                  t_env: int) -> th.Tensor:
        """One step of `optimiser` (or of each of a tuple of them) on `loss`, the gradient of `params`
        clipped to grad_norm_clip as one vector; the norm before clipping. A NaN or infinite loss or
        gradient stops training before the step (NonFiniteLoss)."""
        optimisers = optimiser if isinstance(optimiser, tuple) else (optimiser,)
        _check_finite("loss", loss, t_env)
        for each in optimisers:
            each.zero_grad()
        loss.backward()
        grad_norm = th.nn.utils.clip_grad_norm_(params, self.args.grad_norm_clip)
        _check_finite("gradient norm", grad_norm, t_env)
        for each in optimisers:
            each.step()
        return grad_norm

    def _refresh_targets(self, count: int, quiet: bool = False) -> None:
        """Copy every network into its target network once target_update_interval have passed since the
        last refresh (`count`: the training steps, or episodes, so far; the subclass lists the counter
        last_target_update_step in COUNTERS). `quiet`: without the console line."""
        if (count - self.last_target_update_step) / self.args.target_update_interval >= 1.0:
            for name, target in self.target_networks.items():
                target.load_state_dict(self.networks[name].state_dict())
            if not quiet:
                self.logger.console_logger.info("Updated target network")
            self.last_target_update_step = count

    def _logging(self, t_env: int) -> bool:
        return t_env - self.log_stats_t >= self.args.learner_log_interval

    def _log(self, stats: dict, t_env: int) -> None:
        for key, value in stats.items():
            self.logger.log_stat(key, float(value), t_env)
        self.log_stats_t = t_env

    def cuda(self) -> None:
        self.mac.cuda()
        for network in (*self.networks.values(), *self.target_networks.values()):
            network.cuda()

    def save_models(self, path: str) -> None:
        """Write the agent (via the mac), the other networks and the optimisers into directory `path`, and
        the target networks into path/target."""
        self.mac.save_models(path)
        for name, module in {**self.networks, **self.optimisers}.items():
            th.save(module.state_dict(), os.path.join(path, name))
        if self.target_networks:
            os.makedirs(os.path.join(path, TARGET_DIR), exist_ok=True)
        for name, network in self.target_networks.items():
            th.save(network.state_dict(), os.path.join(path, TARGET_DIR, name))

    def model_files(self) -> list:
        """The files save_models writes, relative to its folder."""
        return ([self.mac.AGENT_FILE, *self.networks, *self.optimisers]
                + [os.path.join(TARGET_DIR, name) for name in self.target_networks])

    def load_models(self, path: str) -> None:
        """Load what save_models wrote; the target networks start as copies of the loaded networks (as
        PyMARL2 loads them); load_target_models restores the saved ones."""
        self.mac.load_models(path)
        for name, module in {**self.networks, **self.optimisers}.items():
            module.load_state_dict(th.load(os.path.join(path, name), map_location="cpu"))
        for name, network in self.target_networks.items():
            network.load_state_dict(self.networks[name].state_dict())

    def load_target_models(self, path: str) -> None:
        """Load the target networks saved by save_models into path/target (to resume training exactly)."""
        for name, network in self.target_networks.items():
            network.load_state_dict(th.load(os.path.join(path, TARGET_DIR, name), map_location="cpu"))

    def state_dict(self) -> dict:
        """The learner's counters (the networks and optimisers are in the files of save_models)."""
        return {name: getattr(self, name) for name in self.COUNTERS}

    def load_state_dict(self, state: dict) -> None:
        for name in self.COUNTERS:
            setattr(self, name, state[name])
