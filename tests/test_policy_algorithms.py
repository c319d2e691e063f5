"""PyMARL2's policy-gradient algorithms (COMA, IPPO, VMIX, LICA, DOP, RIIT): the multinomial and gumbel selectors'
sampling, the losses and targets on small hand-built tensors, shapes for several agent counts, exact save and
load, runs from the command line on 3m with resumes, and learning checks on the one-step matrix game."""
import copy
import logging
import os
import random
import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch as th

from components.action_selectors import REGISTRY as selector_REGISTRY
from components.action_selectors import gumbel_softmax
from components.episode_buffer import EpisodeBatch, ReplayBuffer
from controllers import REGISTRY as mac_REGISTRY
from learners.coma_learner import counterfactual_advantages, renormalise_available
from learners.policy_learner import adaptive_entropy_loss, entropy
from learners.ppo_learner import clipped_surrogate_loss, clipped_value_loss, normalise_advantages
from modules.mixers.qmix_original import OriginalQMixer
from learners.q_learner import Transitions, batch_transitions
from main import build_config, checked_params
from main_runs import read_json, run_main
from run.run import LOOPS, TrainingLoop, args_sanity_check, build_scheme, setup_learning
from runners import REGISTRY as runner_REGISTRY
from test_learner import N_ACTIONS, OBS_DIM, FakeLogger, make_batch, make_scheme
import test_readme
from test_readme import shortened
import test_value_algorithms as value_tests
from test_value_algorithms import alg_args, make_alg_learner, saved_and_restored, short_smac_run
from utils.config_check import range_error
from utils.logging import Logger
from utils.rl_utils import build_gae_targets, build_tree_backup_targets
from utils.value_norm import ValueNorm

th.set_num_threads(1)
LOG = logging.getLogger("test_policy_algorithms")

ALGS = ["coma", "ippo", "vmix", "lica", "dop", "riit", "riit_online"]
# What each learner logs, under PyMARL2's names.
STATS = {
    "coma_learner": {"critic_loss", "critic_grad_norm", "td_error_abs", "q_taken_mean", "target_mean",
                     "advantage_mean", "coma_loss", "agent_grad_norm", "pi_max"},
    "ppo_learner": {"advantage_mean", "actor_loss", "entropy_loss", "grad_norm", "lr", "critic_loss", "target_mean"},
    "policy_gradient_v2": {"critic_loss", "td_error_abs", "q_taken_mean", "target_mean", "pg_loss", "advantage_mean",
                           "coma_loss", "entropy_loss", "agent_grad_norm"},
    "lica_learner": {"critic_loss", "critic_grad_norm", "td_error_abs", "q_t_mean", "target_mean", "mix_loss",
                     "entropy", "agent_grad_norm"},
    "offpg_learner": {"critic_loss", "critic_grad_norm", "td_error_abs", "q_taken_mean", "target_mean", "q_max_mean",
                      "q_min_mean", "q_max_var", "q_min_var", "q_max_first", "q_min_first", "coma_loss",
                      "agent_grad_norm", "pi_max"},
    "fmac_learner": {"critic_loss", "critic_grad_norm", "target_vals", "pg_loss", "entropy_loss", "agent_grad_norm",
                     "pi_max"},
}


def policy_batch(seed: int = 0, n_agents: int = 3) -> EpisodeBatch:
    """test_learner's make_batch with the probabilities the actions were sampled from (save_probs)."""
    base = make_batch(seed, n_agents=n_agents, state_dim=2 * n_agents)
    env_info = {"n_agents": n_agents, "n_actions": N_ACTIONS, "state_shape": 2 * n_agents, "obs_shape": OBS_DIM}
    scheme, groups, preprocess = build_scheme(env_info, save_probs=True)
    batch = EpisodeBatch(scheme, groups, base.batch_size, base.max_seq_length, preprocess=preprocess)
    for key in base.scheme:
        batch[key][:] = base[key]
    logits = th.randn(batch["probs"].shape, generator=th.Generator().manual_seed(seed))
    probs = th.softmax(logits, dim=-1) * batch["avail_actions"]  # [bs, T, n_agents, n_actions]
    batch["probs"][:] = probs / probs.sum(-1, keepdim=True).clamp(min=1e-8)
    return batch


def batches(n_agents: int = 3) -> list:
    return [policy_batch(seed, n_agents) for seed in range(3)]


def policy_networks(learner) -> dict:
    """Every network of a policy learner (the agent, its critics and their targets), by name."""
    targets = {f"target/{name}": network for name, network in learner.target_networks.items()}
    return {"agent": learner.mac.agent, **learner.networks, **targets}


def same_networks(a, b) -> bool:
    return value_tests.same_networks(a, b, policy_networks)


# --- the multinomial action selector ---------------------------------------------------------------

def multinomial(**overrides):
    args = dict(epsilon_start=0.2, epsilon_finish=0.2, epsilon_anneal_time=100, test_greedy=True, save_probs=False)
    args.update(overrides)
    return selector_REGISTRY["multinomial"](SimpleNamespace(**args))


def test_multinomial_samples_the_available_policy_with_an_epsilon_floor():
    th.manual_seed(0)
    selector = multinomial(save_probs=True)
    policy = th.tensor([0.5, 0.1, 0.1, 0.3])  # renormalised over actions 0-2: 5/7, 1/7, 1/7
    avail = th.tensor([1, 1, 1, 0])
    n = 40000
    actions, probs = selector.select_action(policy.expand(n, 1, 4), avail.expand(n, 1, 4), t_env=0)
    expected = 0.8 * th.tensor([5 / 7, 1 / 7, 1 / 7, 0.0]) + 0.2 * th.tensor([1 / 3, 1 / 3, 1 / 3, 0.0])
    assert th.allclose(probs[0, 0], expected, atol=1e-6)
    frequencies = th.bincount(actions.flatten(), minlength=4).float() / n
    assert frequencies[3] == 0 and th.allclose(frequencies, expected, atol=0.01), frequencies
    # The floor: even an action the policy gives 0 keeps epsilon / n_available.
    rare, _ = selector.select_action(th.tensor([1.0, 0.0, 0.0]).expand(n, 1, 3), th.ones(n, 1, 3), t_env=0)
    assert (rare == 1).float().mean().item() == pytest.approx(0.2 / 3, abs=0.006)


def test_multinomial_epsilon_follows_its_schedule():
    selector = multinomial(epsilon_start=0.5, epsilon_finish=0.01, epsilon_anneal_time=100)
    policies, avail = th.full((2, 3, 4), 0.25), th.ones(2, 3, 4)
    for t_env, epsilon in ((0, 0.5), (50, 0.255), (1000, 0.01)):
        selector.select_action(policies, avail, t_env)
        assert selector.epsilon == pytest.approx(epsilon)


def test_multinomial_tests_greedily_among_available_actions_unless_told_to_sample():
    policies = th.tensor([[[0.1, 0.2, 0.7], [0.6, 0.3, 0.1]]])  # [1, 2 agents, 3 actions]
    avail = th.tensor([[[1, 1, 0], [1, 1, 1]]])
    greedy = multinomial(epsilon_start=1.0, epsilon_finish=1.0)
    for _ in range(20):
        assert greedy.select_action(policies, avail, 0, test_mode=True).tolist() == [[1, 0]]
    th.manual_seed(0)
    sampling = multinomial(epsilon_start=1.0, epsilon_finish=1.0, test_greedy=False)
    drawn = th.stack([sampling.select_action(policies, avail, 0, test_mode=True) for _ in range(200)])
    assert len(th.unique(drawn[:, 0, 1])) == 3 and (drawn[:, 0, 0] != 2).all()


# --- COMA -----------------------------------------------------------------------------------------

def test_counterfactual_advantage_by_hand():
    # One agent, 3 actions: Q(s, (u^-i, a)) for a = 0, 1, 2 and the agent's policy.
    q_values = th.tensor([[1.0, 4.0, -2.0]])
    policies = th.tensor([[0.2, 0.5, 0.3]])
    baseline = 0.2 * 1.0 + 0.5 * 4.0 + 0.3 * -2.0  # 1.6
    advantages = counterfactual_advantages(policies, q_values, th.tensor([[1]]))
    assert advantages.tolist() == pytest.approx([4.0 - baseline])
    assert counterfactual_advantages(policies, q_values, th.tensor([[2]])).tolist() == pytest.approx([-2.0 - baseline])


def test_coma_renormalises_over_available_actions_and_entropy_ignores_the_others():
    policies = th.tensor([[0.2, 0.3, 0.5], [0.3, 0.3, 0.4]])
    avail = th.tensor([[1, 1, 0], [0, 0, 0]])  # the second row: a padded step
    renormalised = renormalise_available(policies, avail)
    assert th.allclose(renormalised, th.tensor([[0.4, 0.6, 0.0], [0.0, 0.0, 0.0]]))
    assert entropy(renormalised).tolist() == pytest.approx([-(0.4 * th.log(th.tensor(0.4)) + 0.6 * th.log(
        th.tensor(0.6))).item(), 0.0])


def test_coma_actor_loss_by_hand():
    learner, _ = make_alg_learner("coma", n_agents=2, entropy=0.5)
    # [bs 1, T-1 2, agents 2, actions 2]; the second transition is padding (mask 0).
    policies = th.tensor([[[[0.25, 0.75], [0.5, 0.5]], [[0.5, 0.5], [0.5, 0.5]]]], requires_grad=True)
    q_values = th.tensor([[[[1.0, 3.0], [2.0, 0.0]], [[9.0, 9.0], [9.0, 9.0]]]])
    actions = th.tensor([[[[1], [0]], [[0], [0]]]])
    mask = th.tensor([[[1.0], [0.0]]])
    loss, stats = learner._actor_loss(policies, q_values, Transitions(None, actions, None, mask))
    adv = [3.0 - (0.25 * 1 + 0.75 * 3), 2.0 - (0.5 * 2 + 0.5 * 0)]  # 0.5, 1.0
    log_pi = [th.log(th.tensor(0.75)).item(), th.log(th.tensor(0.5)).item()]
    coma_loss = -(adv[0] * log_pi[0] + adv[1] * log_pi[1]) / 2
    entropies = [-(0.25 * th.log(th.tensor(0.25)) + 0.75 * th.log(th.tensor(0.75))).item(),
                 th.log(th.tensor(2.0)).item()]
    assert loss.item() == pytest.approx(coma_loss - 0.5 * sum(entropies) / 2, rel=1e-5)
    assert stats["coma_loss"].item() == pytest.approx(coma_loss, rel=1e-5)
    assert stats["advantage_mean"].item() == pytest.approx(0.75) and stats["pi_max"].item() == pytest.approx(0.625)


def test_coma_critic_sees_the_others_actions_but_not_its_own():
    learner, _ = make_alg_learner("coma", n_agents=3)
    batch = batches()[0]
    inputs = learner.critic.build_inputs(batch)  # [bs, T, n, state + obs + 2 n A + n]
    n, n_actions = 3, learner.n_actions
    state_obs = batch["state"].shape[-1] + batch["obs"].shape[-1]
    others = inputs[..., state_obs:state_obs + n * n_actions].reshape(*inputs.shape[:3], n, n_actions)
    last = inputs[..., state_obs + n * n_actions:state_obs + 2 * n * n_actions].reshape(*inputs.shape[:3], n, n_actions)
    actions = th.nn.functional.one_hot(batch["actions"][..., 0].long(), n_actions).float()  # [bs, T, n, A]
    for i in range(n):
        assert (others[:, :, i, i] == 0).all()  # its own action is hidden
        for j in set(range(n)) - {i}:
            assert th.equal(others[:, :, i, j], actions[:, :, j])
        assert (last[:, 0] == 0).all() and th.equal(last[:, 1:, i], actions[:, :-1])
    assert th.equal(inputs[..., -n:], th.eye(n).expand(*inputs.shape[:2], -1, -1))


def test_coma_critic_trains_once_per_valid_transition_and_refreshes_its_target():
    learner, _ = make_alg_learner("coma", target_update_interval=5)
    batch = batches()[0]  # 4 transitions: all valid in episode 1
    learner.train(batch, t_env=0, episode_num=0)
    assert learner.critic_training_steps == 4 and learner.last_target_update_step == 0
    assert not all(th.equal(a, b) for a, b in zip(learner.critic.parameters(), learner.target_critic.parameters()))
    learner.train(batch, t_env=1, episode_num=1)
    assert learner.critic_training_steps == 8 and learner.last_target_update_step == 8
    assert all(th.equal(a, b) for a, b in zip(learner.critic.parameters(), learner.target_critic.parameters()))


# --- GAE ------------------------------------------------------------------------------------------

def test_gae_by_hand_stops_at_termination_and_padding():
    gamma, lam = 0.9, 0.5
    # Episode 0: 2 transitions, the second terminal, then padding; episode 1: 3 transitions, cut by the limit.
    rewards = th.tensor([[1.0, 2.0, 0.0], [1.0, 0.0, 3.0]]).unsqueeze(-1)  # [2, T-1 3, 1]
    terminated = th.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]).unsqueeze(-1)
    mask = th.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]).unsqueeze(-1)
    values = th.tensor([[0.5, 1.0, 7.0, 7.0], [0.2, 0.4, 0.6, 0.8]]).unsqueeze(-1)  # [2, T 4, 1]
    advantages, targets = build_gae_targets(rewards, terminated, mask, values, gamma, lam)
    d0 = [1.0 + gamma * 1.0 - 0.5, 2.0 - 1.0]  # no bootstrap from the terminal step's 7.0
    d1 = [1.0 + gamma * 0.4 - 0.2, 0.0 + gamma * 0.6 - 0.4, 3.0 + gamma * 0.8 - 0.6]
    expected = [[d0[0] + gamma * lam * d0[1], d0[1], 0.0],
                [d1[0] + gamma * lam * (d1[1] + gamma * lam * d1[2]), d1[1] + gamma * lam * d1[2], d1[2]]]
    assert th.allclose(advantages[..., 0], th.tensor(expected))
    assert th.allclose(targets, values[:, :-1] + advantages)


# --- IPPO -----------------------------------------------------------------------------------------

def test_clipped_surrogate_by_hand():
    ratios = th.tensor([1.5, 1.5, 0.5, 0.5, 3.0])
    advantages = th.tensor([1.0, -1.0, 1.0, -1.0, 2.0])
    mask = th.tensor([1.0, 1.0, 1.0, 1.0, 0.0])  # the last entry is padding
    old_log_pi = th.log(th.tensor([0.2, 0.4, 0.6, 0.8, 0.1]))
    loss = clipped_surrogate_loss(old_log_pi + th.log(ratios), old_log_pi, advantages, 0.2, mask)
    # min(r A, clip(r, 0.8, 1.2) A): 1.2, -1.5, 0.5, -0.8
    assert loss.item() == pytest.approx(-(1.2 - 1.5 + 0.5 - 0.8) / 4)


def test_clipped_value_loss_by_hand():
    old_values = th.tensor([1.0, 1.0, 1.0])
    values = th.tensor([1.5, 0.9, 2.0])
    targets = th.tensor([2.0, 0.0, 0.0])
    mask = th.tensor([1.0, 1.0, 0.0])
    # clipped values 1.2, 0.9: max((1.5-2)^2, (1.2-2)^2) = 0.64, max(0.81, 0.81) = 0.81
    assert clipped_value_loss(values, old_values, targets, 0.2, mask).item() == pytest.approx(0.5 * (0.64 + 0.81) / 2)


def test_advantages_are_normalised_over_valid_entries():
    advantages = th.tensor([[1.0, 3.0, 100.0]])
    normalised = normalise_advantages(advantages, th.tensor([[1.0, 1.0, 0.0]]))
    std = th.tensor([1.0, 3.0]).std().item()
    assert normalised[0, :2].tolist() == pytest.approx([-1.0 / (std + 1e-6), 1.0 / (std + 1e-6)])


def test_value_norm_debiases_its_running_moments_and_inverts():
    norm = ValueNorm()
    values = th.tensor([1.0, 2.0, 3.0, 6.0])
    norm.update(values)
    mean, var = norm.mean_var()  # one update: the batch's own moments, debiased
    assert mean.item() == pytest.approx(3.0, rel=1e-4) and var.item() == pytest.approx(3.5, rel=1e-3)
    assert th.allclose(norm.normalize(values), (values - mean) / var.sqrt())
    assert th.allclose(norm.denormalize(norm.normalize(values)), values, atol=1e-5)
    norm.update(th.full((4,), 3.0))
    assert norm.mean_var()[1].item() == pytest.approx(1.75, rel=1e-3)  # equal weights for both batches


def test_ippo_critic_is_a_separate_one_output_network_of_the_agent_class():
    learner, _ = make_alg_learner("ippo", n_agents=3)
    assert type(learner.critic) is type(learner.mac.agent) and learner.critic.fc2.out_features == 1
    assert learner.critic.layer_norm is not None  # ippo.yaml's use_layer_norm
    assert {id(p) for p in learner.critic.parameters()}.isdisjoint(id(p) for p in learner.mac.parameters())


def test_ippo_takes_mini_epochs_steps_and_the_first_ratio_is_one_on_policy():
    learner, logger = make_alg_learner("ippo", n_agents=2, mini_epochs=1, entropy=0.0)
    batch = policy_batch(0, n_agents=2)
    with th.no_grad():  # store the current policy as the behaviour policy: every ratio is 1
        batch["probs"][:] = learner.mac.forward_sequence(batch)
    learner.train(batch, t_env=0, episode_num=0)
    # ratio 1: the objective is -mean(A), and A is normalised to mean 0 over the valid entries
    assert logger.stats["actor_loss"][0][1] == pytest.approx(0.0, abs=1e-6)
    steps, optimiser_step = [], learner.optimiser.step

    def counted_step(*args, **kwargs):
        steps.append(1)
        return optimiser_step(*args, **kwargs)

    learner.optimiser.step = counted_step
    learner.args.mini_epochs = 8
    learner.train(batch, t_env=1, episode_num=1)
    assert len(steps) == 8


def test_the_runner_stores_the_probabilities_it_sampled_from(tmp_path):
    config = build_config(["main.py", "--config=ippo", "--env-config=one_step_matrix_game"])
    config.update(runner="episode", batch_size_run=1, use_cuda=False, local_results_path=str(tmp_path),
                  epsilon_start=0.5, epsilon_finish=0.5)  # with an epsilon floor, to see it stored too
    args = SimpleNamespace(**args_sanity_check(config, FakeLogger().console_logger), device="cpu")
    runner = runner_REGISTRY[args.runner](args=args, logger=Logger(FakeLogger().console_logger))
    try:
        _, learner = setup_learning(args, runner, Logger(FakeLogger().console_logger))
        batch = runner.run(test_mode=False)
    finally:
        runner.close_env()
    with th.no_grad():
        policy = learner.mac.forward_sequence(batch)[:, 0]  # [1, n_agents, n_actions], all available
    assert th.allclose(batch["probs"][:, 0], 0.5 * policy + 0.5 / 3, atol=1e-6)


# --- VMIX -----------------------------------------------------------------------------------------

def test_ppo_mac_gives_a_policy_over_available_actions_and_a_value_per_agent():
    learner, _ = make_alg_learner("vmix", n_agents=3)
    batch = policy_batch(1)
    with th.no_grad():
        policies, values = learner.mac.forward_sequence(batch)
        learner.mac.init_hidden(batch.batch_size)
        acting = [learner.mac.forward(batch, t) for t in range(batch.max_seq_length)]
    assert policies.shape == (2, batch.max_seq_length, 3, N_ACTIONS) and values.shape == (2, batch.max_seq_length, 3, 1)
    filled = batch["filled"][..., 0].bool()  # [bs, T]
    assert th.allclose(policies.sum(-1)[filled], th.ones(1))
    assert (policies[filled][batch["avail_actions"][filled] == 0] < 1e-20).all()  # padded steps: none available
    assert th.allclose(policies, th.stack([p for p, _ in acting], 1), atol=1e-5)
    assert th.allclose(values, th.stack([v for _, v in acting], 1), atol=1e-5)
    assert isinstance(learner.mixer, OriginalQMixer) and isinstance(learner.optimiser, th.optim.RMSprop)
    assert learner.optimiser.defaults["eps"] == 1e-8  # torch's, as PyMARL2 builds it


def test_vmix_loss_by_hand():
    learner, _ = make_alg_learner("vmix", n_agents=2, td_lambda=0.0, gamma=0.9, vf_coef=0.1, ent_coef=0.01)
    # [bs 1, T-1 2, agents 2, actions 2]; the episode ends with its second transition
    policies = th.tensor([[[[0.25, 0.75], [0.5, 0.5]], [[0.8, 0.2], [0.1, 0.9]]]])
    joint_values = th.tensor([[[1.0], [2.0], [5.0]]], requires_grad=True)  # [bs, T 3, 1]
    actions = th.tensor([[[[1], [0]], [[0], [1]]]])
    data = Transitions(th.tensor([[[1.0], [0.5]]]), actions, th.tensor([[[0.0], [1.0]]]), th.ones(1, 2, 1))
    loss, stats = learner._loss(policies, joint_values, data)
    targets = [1.0 + 0.9 * 2.0, 0.5]  # one-step returns (td_lambda 0); none after the terminal step
    advantages = [targets[0] - 1.0, targets[1] - 2.0]
    log_pi = th.log(th.tensor([[0.75, 0.5], [0.8, 0.9]]))
    pg_loss = -(advantages[0] * log_pi[0].sum() + advantages[1] * log_pi[1].sum()).item() / 4
    vf_loss = ((1.0 - targets[0]) ** 2 + (2.0 - targets[1]) ** 2) / 2
    mean_entropy = entropy(policies).mean().item()
    assert loss.item() == pytest.approx(pg_loss + 0.1 * vf_loss - 0.01 * mean_entropy, rel=1e-5)
    assert (stats["pg_loss"].item(), stats["critic_loss"].item()) == pytest.approx((pg_loss, vf_loss), rel=1e-5)
    assert stats["target_mean"].item() == pytest.approx(sum(targets) / 2)
    loss.backward()  # the value loss alone moves the values: 0.1 * 2 (V - G) / 2 per step, nothing for the last
    expected = [0.1 * (1.0 - targets[0]), 0.1 * (2.0 - targets[1]), 0.0]
    assert joint_values.grad[0, :, 0].tolist() == pytest.approx(expected)


def test_vmix_without_a_mixer_trains_independent_actor_critics():
    learner, logger = make_alg_learner("vmix", n_agents=3, mixer=None)
    learner.train(policy_batch(0), t_env=0, episode_num=0)
    assert learner.mixer is None and "mixer.th" not in learner.model_files() and logger.stats["critic_loss"]
    with pytest.raises(ValueError, match="policy_gradient_v2 mixes the agents' values with qmix or vdn"):
        make_alg_learner("vmix", mixer="qatten")


# --- the gumbel action selector and LICA ------------------------------------------------------------

def gumbel(**overrides):
    args = dict(epsilon_start=0.0, epsilon_finish=0.0, epsilon_anneal_time=100, test_greedy=True, save_probs=False)
    args.update(overrides)
    return selector_REGISTRY["gumbel"](SimpleNamespace(**args))


def test_gumbel_softmax_straight_through_is_one_hot_forward_and_soft_backward():
    logits = th.tensor([[0.5, -1.0, 2.0, 0.0], [1.0, 1.0, -3.0, 0.3]], requires_grad=True)
    weights = th.tensor([1.0, -2.0, 0.5, 3.0])
    th.manual_seed(0)
    hard = gumbel_softmax(logits, temperature=0.5, hard=True)
    th.manual_seed(0)  # the same noise
    soft = gumbel_softmax(logits, temperature=0.5)
    assert th.equal(hard, th.nn.functional.one_hot(soft.argmax(-1), 4).float())  # exactly one-hot
    assert th.allclose(soft.sum(-1), th.ones(2)) and (soft > 0).all() and not th.equal(soft, hard)
    hard_grad, = th.autograd.grad((hard * weights).sum(), logits)
    soft_grad, = th.autograd.grad((soft * weights).sum(), logits)
    assert th.equal(hard_grad, soft_grad) and hard_grad.abs().sum() > 0


def test_gumbel_selector_samples_softmax_of_the_available_logits():
    th.manual_seed(0)
    selector = gumbel(save_probs=True)
    logits = th.tensor([1.0, 0.0, -1.0, 5.0])
    avail = th.tensor([1, 1, 1, 0])  # the most likely action is unavailable
    n = 40000
    actions, probs = selector.select_action(logits.expand(n, 1, 4), avail.expand(n, 1, 4), t_env=0)
    expected = th.softmax(th.tensor([1.0, 0.0, -1.0]), dim=0)
    assert th.allclose(probs[0, 0, :3], expected, atol=1e-6) and probs[0, 0, 3] < 1e-20
    frequencies = th.bincount(actions.flatten(), minlength=4).float() / n
    assert frequencies[3] == 0 and th.allclose(frequencies[:3], expected, atol=0.01), frequencies
    assert selector.epsilon == 0.0  # logged as PyMARL2 does; never explores
    logits, avail = th.tensor([[[0.1, 2.0, 0.5], [3.0, 0.0, 1.0]]]), th.tensor([[[1, 0, 1], [1, 1, 1]]])
    greedy = selector.select_action(logits, avail, 0, test_mode=True)[0]
    assert greedy.tolist() == [[2, 0]]


def test_controllers_hand_the_gumbel_selector_masked_logits():
    args = alg_args("lica", n_agents=3)
    scheme, groups, preprocess = make_scheme(3, N_ACTIONS, 6, OBS_DIM)
    mac = mac_REGISTRY[args.mac](scheme, groups, args)
    batch = policy_batch(0)
    mac.init_hidden(batch.batch_size)
    logits = mac.acting_outputs(batch, 0)  # [bs, n_agents, n_actions]
    mac.init_hidden(batch.batch_size)
    policies = mac.forward(batch, 0)
    assert th.allclose(th.softmax(logits, -1), policies)
    assert (logits[batch["avail_actions"][:, 0] == 0] == -1e5).all()
    with pytest.raises(ValueError, match="the gumbel action selector samples policies: it needs agent_output_type"):
        mac_REGISTRY["basic_mac"](scheme, groups, alg_args("lica", n_agents=3, agent_output_type="q"))


def test_lica_adaptive_entropy_term_has_a_gradient_of_entropy_coef():
    mix_value = th.tensor(2.0, requires_grad=True)
    for value in (0.5, 1.7):
        mean_entropy = th.tensor(value, requires_grad=True)
        loss = adaptive_entropy_loss(mix_value, mean_entropy, 0.06)
        assert loss.item() == pytest.approx(-2.0 - 0.06)
        assert th.autograd.grad(loss, mean_entropy)[0].item() == pytest.approx(-0.06 / value)
    assert adaptive_entropy_loss(mix_value, th.tensor(0.0), 0.06).item() == -2.0  # no division by zero


def test_lica_critic_by_hand():
    learner, _ = make_alg_learner("lica", n_agents=2, lica_mixing_embed_dim=3, hypernet_embed_dim=4)
    critic = learner.critic
    probs = th.softmax(th.randn(2, 3, 2, N_ACTIONS), -1)  # [bs 2, T 3, agents 2, actions]
    states = th.randn(2, 3, 4)
    q = critic(probs, states)
    assert q.shape == (2, 3, 1)
    for b, t in ((0, 0), (1, 2)):
        s, p = states[b, t], probs[b, t].reshape(-1)  # the joint distribution [2 * n_actions]
        w1 = critic.hyper_w_1(s).view(2 * N_ACTIONS, 3)
        hidden = th.relu(p @ w1 + critic.hyper_b_1(s))
        expected = hidden @ critic.hyper_w_final(s) + critic.hyper_b_2(s)
        assert q[b, t].item() == pytest.approx(expected.item(), rel=1e-5)


def test_lica_actor_loss_by_hand():
    learner, _ = make_alg_learner("lica", n_agents=2, entropy_coef=0.06)
    # [bs 1, T-1 2, agents 2, actions N]; the second transition is padding (mask 0)
    policies = th.softmax(th.randn(1, 2, 2, N_ACTIONS), -1)
    states, mask = th.randn(1, 2, 4), th.tensor([[[1.0], [0.0]]])
    loss, stats = learner._actor_loss(policies, states, mask)
    mix_value = learner.critic(policies, states)[0, 0, 0].item()
    assert loss.item() == pytest.approx(-mix_value - 0.06, rel=1e-5) and stats["mix_loss"] == loss.detach()
    assert stats["entropy"].item() == pytest.approx(entropy(policies[0, 0]).mean().item(), rel=1e-6)


def test_lica_critic_trains_once_per_batch_on_td_lambda_targets_and_refreshes_its_target():
    learner, logger = make_alg_learner("lica", target_update_interval=2, td_lambda=0.0, gamma=0.5)
    batch = batches()[0]
    learner.train(batch, t_env=0, episode_num=0)
    assert learner.critic_training_steps == 1 and learner.last_target_update_step == 0
    # td_lambda 0: one-step targets r_t + gamma Q'(s_{t+1}, u_{t+1}) of the (still initial) target critic
    actions = th.nn.functional.one_hot(batch["actions"][..., 0].long(), N_ACTIONS).float()
    with th.no_grad():
        target_q = learner.target_critic(actions, batch["state"])[..., 0]  # [bs, T]
    rewards = batch["reward"][..., 0]
    # Episode 0 ends with its second transition (no bootstrap there); episode 1 is cut by the limit.
    targets = [rewards[0, 0] + 0.5 * target_q[0, 1], rewards[0, 1]]
    targets += [rewards[1, t] + 0.5 * target_q[1, t + 1] for t in range(batch.max_seq_length - 1)]
    assert logger.stats["target_mean"][-1][1] == pytest.approx(th.stack(targets).mean().item(), rel=1e-5)
    learner.train(batch, t_env=1, episode_num=1)
    assert learner.critic_training_steps == 2 and learner.last_target_update_step == 2
    assert all(th.equal(a, b) for a, b in zip(learner.critic.parameters(), learner.target_critic.parameters()))


# --- DOP ------------------------------------------------------------------------------------------

def test_tree_backup_targets_by_hand():
    gamma, lam = 0.9, 0.5
    # Episode 0: 3 transitions cut by the limit (bootstraps from the last stored step); episode 1: 2
    # transitions, the second terminal, then padding.
    rewards = th.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 0.0]]).unsqueeze(-1)  # [2, T-1 3, 1]
    terminated = th.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0]]).unsqueeze(-1)
    mask = th.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]]).unsqueeze(-1)
    q = th.tensor([[0.5, 1.0, 1.5, 2.0], [0.2, 0.4, 9.0, 9.0]]).unsqueeze(-1)  # [2, T 4, 1]: target Q_tot(u taken)
    e = th.tensor([[0.6, 1.2, 1.4, 2.5], [0.3, 0.5, 9.0, 9.0]]).unsqueeze(-1)  # target Q_tot of the policy
    c = th.tensor([[0.9, 0.8, 0.7, 0.6], [0.5, 0.4, 0.3, 0.2]]).unsqueeze(-1)  # pi(u taken)
    targets = build_tree_backup_targets(rewards, terminated, mask, q, e, c, gamma, lam, steps=2)
    d0 = [1.0 + gamma * 1.2 - 0.5, 2.0 + gamma * 1.4 - 1.0, 3.0 + gamma * 2.5 - 1.5]
    d1 = [1.0 + gamma * 0.5 - 0.2, 2.0 - 0.4]  # nothing after the terminal step
    gl = gamma * lam
    expected = [[0.5 + d0[0] + gl * 0.8 * d0[1], 1.0 + d0[1] + gl * 0.7 * d0[2], 1.5 + d0[2]],
                [0.2 + d1[0] + gl * 0.4 * d1[1], 0.4 + d1[1], 0.0]]
    assert targets[..., 0].tolist() == [pytest.approx(row) for row in expected]
    one_step = build_tree_backup_targets(rewards, terminated, mask, q, e, c, gamma, lam, steps=1)
    assert one_step[0, :, 0].tolist() == pytest.approx([q[0, t, 0].item() + d0[t] for t in range(3)])


def test_dop_credit_is_the_mixers_normalised_weight_product():
    mixer = OriginalQMixer(SimpleNamespace(n_agents=3, state_shape=4, mixing_embed_dim=5))
    states = th.randn(2, 3, 4)
    credit = mixer.k(states)  # [2, 3, n_agents]
    w1 = mixer.hyper_w_1(states[1, 2]).abs().view(3, 5)
    w2 = mixer.hyper_w_final(states[1, 2]).abs()
    expected = w1 @ w2
    assert th.allclose(credit[1, 2], expected / expected.sum()) and th.allclose(credit.sum(-1), th.ones(2, 3))


@pytest.mark.parametrize("mask_before_softmax", [True, False])
def test_dop_mac_adds_the_epsilon_floor_in_training_only(mask_before_softmax):
    args = alg_args("dop", n_agents=3, mask_before_softmax=mask_before_softmax)
    scheme, groups, preprocess = make_scheme(3, N_ACTIONS, 6, OBS_DIM)
    mac = mac_REGISTRY["dop_mac"](scheme, groups, args)
    batch = policy_batch(0)
    avail = batch["avail_actions"][:, 0].float()  # [bs, n_agents, n_actions]
    mac.init_hidden(batch.batch_size)
    pi = mac.forward(batch, 0, test_mode=True)
    mac.init_hidden(batch.batch_size)
    floored = mac.forward(batch, 0)
    epsilon = mac.action_selector.epsilon
    assert epsilon == 0.5
    n = avail.sum(-1, keepdim=True) if mask_before_softmax else N_ACTIONS
    expected = (1 - epsilon) * pi + epsilon / n
    assert th.allclose(floored, expected * avail if mask_before_softmax else expected)
    assert th.allclose(mac.forward_sequence(batch)[:, 0], floored, atol=1e-6)


def test_sample_latest_takes_the_newest_episodes_across_the_ring_end():
    scheme, groups, preprocess = make_scheme(2, N_ACTIONS, 4, OBS_DIM)
    buffer = ReplayBuffer(scheme, groups, 5, 4, preprocess=preprocess)
    for episode in range(7):  # slots 0-4, then 5 and 6 overwrite slots 0 and 1
        batch = EpisodeBatch(scheme, groups, 1, 4, preprocess=preprocess)
        batch.update({"reward": th.full((1, 1), float(episode))}, ts=slice(0, 1))
        buffer.insert_episode_batch(batch)
    assert buffer.sample_latest(3)["reward"][:, 0, 0].tolist() == [4.0, 5.0, 6.0]
    assert buffer.sample_latest(5)["reward"][:, 0, 0].tolist() == [2.0, 3.0, 4.0, 5.0, 6.0]


def test_dop_critic_trains_on_both_samples_per_valid_step_and_refreshes_critic_and_mixer():
    learner, logger = make_alg_learner("dop", target_update_interval=8)
    on_batch, off_batch = batches()[0], batches()[1][:, :3]  # the off-policy sample is shorter: padded
    learner.train_critic(on_batch, off_batch, t_env=0)
    assert learner.critic_training_steps == 4 and learner.last_target_update_step == 0  # 4 transitions
    assert not all(th.equal(a, b) for a, b in zip(learner.mixer.parameters(), learner.target_mixer.parameters()))
    learner.train_critic(on_batch, off_batch, t_env=1)
    assert learner.critic_training_steps == 8 and learner.last_target_update_step == 8
    for online, target in ((learner.critic, learner.target_critic), (learner.mixer, learner.target_mixer)):
        assert all(th.equal(a, b) for a, b in zip(online.parameters(), target.parameters()))
    agent_before = copy.deepcopy(learner.mac.agent.state_dict())
    learner.train(on_batch, t_env=2, episode_num=2)
    assert STATS["offpg_learner"] <= set(logger.stats)
    assert any(not th.equal(agent_before[key], value) for key, value in learner.mac.agent.state_dict().items())
    with pytest.raises(ValueError, match="offpg_learner trains in DOP's loop"):
        make_alg_learner("dop", run="default")
    for run, learner_name in (("dop_run", "offpg_learner"), ("on_off", "fmac_learner")):
        with pytest.raises(ValueError, match=f"run {run} trains .*{learner_name}.*, not lica_learner"):
            LOOPS[run](SimpleNamespace(run=run, learner="lica_learner"), None, None, object(), None)


def test_dop_actor_loss_weights_counterfactual_advantages_by_the_mixers_credit():
    learner, logger = make_alg_learner("dop", n_agents=3)
    batch = batches()[0]
    learner.train(copy.deepcopy(batch), t_env=0, episode_num=0)
    restored, _ = make_alg_learner("dop", n_agents=3)  # the same initial weights
    data = batch_transitions(batch)
    with th.no_grad():
        q_values = restored.critic(restored.critic.build_inputs(batch)[:, :-1])
        credit = restored.mixer.k(batch["state"][:, :-1])
        policies = renormalise_available(restored.mac.forward_sequence(batch)[:, :-1], batch["avail_actions"][:, :-1])
    advantages = counterfactual_advantages(policies, q_values, data.actions)
    pi_taken = th.gather(policies, -1, data.actions).squeeze(-1)
    valid = data.mask.expand_as(advantages) == 1
    expected = -(credit * advantages * th.log(pi_taken))[valid].mean()
    assert logger.stats["coma_loss"][-1][1] == pytest.approx(expected.item(), rel=1e-5)


# --- RIIT -----------------------------------------------------------------------------------------

def test_riit_critic_values_each_agent_from_its_own_action_distribution():
    learner, _ = make_alg_learner("riit", n_agents=3)
    batch = batches()[0]
    actions = th.softmax(th.randn(2, batch.max_seq_length, 3, N_ACTIONS), -1)  # [bs, T, n_agents, n_actions]
    q = learner.critic(batch, actions)  # [bs, T, n_agents, 1]
    changed = actions.clone()
    changed[:, :, 1] = th.softmax(th.randn(2, batch.max_seq_length, N_ACTIONS), -1)  # agent 1 acts otherwise
    q_changed = learner.critic(batch, changed)
    assert q.shape == (2, batch.max_seq_length, 3, 1)
    assert th.equal(q[:, :, [0, 2]], q_changed[:, :, [0, 2]]) and not th.allclose(q[:, :, 1], q_changed[:, :, 1])
    assert learner.critic(batch, actions[:, :2]).shape == (2, 2, 3, 1)  # the first steps only


def test_riit_off_policy_step_trains_the_critic_alone_on_one_step_targets():
    learner, logger = make_alg_learner("riit", n_agents=3, gamma=0.5, target_update_interval=4)
    batch = batches()[0]
    data = batch_transitions(batch)
    onehot = th.nn.functional.one_hot(batch["actions"][..., 0].long(), N_ACTIONS).float()
    with th.no_grad():
        target_q = learner.target_mixer(learner.target_critic(batch, onehot)[..., 0], batch["state"])[..., 0]  # [bs, T]
        q_taken = learner.mixer(learner.critic(batch, onehot[:, :-1])[..., 0], batch["state"][:, :-1])[..., 0]
    # Episode 0 ends with its second transition (no bootstrap there); episode 1 is cut by the limit.
    rewards = batch["reward"][..., 0]
    targets = th.stack([rewards[:, t] + 0.5 * target_q[:, t + 1] * (1 - data.terminated[:, t, 0])
                        for t in range(batch.max_seq_length - 1)], dim=1)  # [bs, T-1]
    valid = data.mask[..., 0] == 1
    agent_before = copy.deepcopy(learner.mac.agent.state_dict())
    learner.train_off_policy(batch, t_env=0, episode_num=3)
    assert logger.stats["target_vals"][-1][1] == pytest.approx(targets[valid].mean().item(), rel=1e-5)
    expected_loss = 0.5 * ((q_taken - targets)[valid] ** 2).sum() / valid.sum()
    assert logger.stats["critic_loss"][-1][1] == pytest.approx(expected_loss.item(), rel=1e-5)
    assert "pg_loss" not in logger.stats and learner.log_stats_t < 0  # the logging schedule did not move
    assert all(th.equal(agent_before[key], value) for key, value in learner.mac.agent.state_dict().items())
    assert learner.last_target_update_step == 0  # refreshed every 4 episodes: not yet at episode 3
    learner.train_off_policy(batch, t_env=1, episode_num=4)
    assert learner.last_target_update_step == 4
    assert all(th.equal(a, b) for a, b in zip(learner.mixer.parameters(), learner.target_mixer.parameters()))


def test_riit_actor_loss_by_hand():
    learner, logger = make_alg_learner("riit", n_agents=2, entropy_coef=0.03)
    twin, _ = make_alg_learner("riit", n_agents=2, entropy_coef=0.03)  # the same initial weights
    batch = policy_batch(0, n_agents=2)
    learner.train(batch, t_env=0, episode_num=0)
    data = batch_transitions(batch)
    twin._train_critic(batch, data, twin.args.lambd, t_env=0)  # the critic step train takes first
    with th.no_grad():
        policies = twin.mac.forward_sequence(batch)[:, :-1]
        q_tot = twin.mixer(twin.critic(batch, policies)[..., 0], batch["state"][:, :-1])[..., 0]  # [bs, T-1]
        mean_entropy = entropy(policies).mean(-1)[data.mask[..., 0] == 1].mean()
    pg_loss = -q_tot[data.mask[..., 0] == 1].mean()
    assert logger.stats["pg_loss"][-1][1] == pytest.approx(pg_loss.item(), rel=1e-5)
    assert logger.stats["entropy_loss"][-1][1] == pytest.approx(mean_entropy.item(), rel=1e-5)
    with pytest.raises(ValueError, match="fmac_learner mixes the agents' Q-values with qmix or vdn"):
        make_alg_learner("riit", mixer="qatten")
    vdn, vdn_logger = make_alg_learner("riit_online", n_agents=2, mixer="vdn")  # Q_tot = Q_1 + Q_2
    vdn.train(batch, t_env=0, episode_num=0)
    assert all(np.isfinite(values[-1][1]) for values in vdn_logger.stats.values())


# --- the training loop and config for the on-policy algorithms -----------------------------------------

@pytest.mark.parametrize("every, trains", [(None, [True, True, True, True]), (4, [False, True, False, True]),
                                           (8, [False, False, False, True])])
def test_accumulated_episodes_skips_training_steps_only(every, trains):
    loop = TrainingLoop.__new__(TrainingLoop)  # only the counters accumulated() reads
    loop.args = SimpleNamespace(accumulated_episodes=every, batch_size_run=2)
    decisions = []
    for loop.episode in (0, 2, 4, 6):
        decisions.append(loop.accumulated())
    assert decisions == trains


def test_on_policy_settings_are_checked():
    config = build_config(["main.py", "--config=ippo", "--env-config=sc2"])
    assert checked_params(["main.py", "with", "accumulated_episodes=4", "eps_clip=0.1"], config)[2:] == \
        ["accumulated_episodes=4", "eps_clip=0.1"]
    assert range_error({**config, "accumulated_episodes": 0}) == "accumulated_episodes=0 must be at least 1"
    assert range_error({**config, "gae_lambda": 1.5}) == "gae_lambda=1.5 must be within [0.0, 1.0]"
    # coma.yaml's SMAC-only env_args.state_last_action is left out for envs that do not take it
    assert "state_last_action" not in build_config(["main.py", "--config=coma", "--env-config=one_step_matrix_game"])[
        "env_args"]
    assert build_config(["main.py", "--config=coma", "--env-config=sc2"])["env_args"]["state_last_action"] is False


# --- every algorithm: shapes, save and load, the command line -----------------------------------------

@pytest.mark.parametrize("n_agents", [2, 3, 5])
@pytest.mark.parametrize("alg", ALGS)
def test_each_algorithm_trains_on_batches_of_several_agent_counts(alg, n_agents):
    learner, logger = make_alg_learner(alg, n_agents=n_agents)
    before = copy.deepcopy(learner.mac.agent.state_dict())
    batch = policy_batch(0, n_agents)
    for step in range(3):
        train_step(learner, batch, step)
    assert STATS[alg_args(alg).learner] <= set(logger.stats)
    assert all(th.isfinite(th.tensor([value for _, value in values])).all() for values in logger.stats.values())
    assert any(not th.equal(before[key], value) for key, value in learner.mac.agent.state_dict().items())


def train_step(learner, batch: EpisodeBatch, step: int) -> None:
    """One training step as the algorithm's loop takes it: DOP's loop trains the critic on an on-policy and an
    off-policy sample (here the batch and its first 3 steps) before the actors, RIIT's on_off loop the critic
    alone on an off-policy sample first."""
    if hasattr(learner, "train_critic"):
        learner.train_critic(batch, batch[:, :3], t_env=step)
    if learner.args.run == "on_off":
        learner.train_off_policy(batch[:, :3], t_env=step, episode_num=step)
    learner.train(batch, t_env=step, episode_num=step)


def train_steps(alg: str, n_steps: int = 3, seed: int = 0, **overrides):
    learner, logger = make_alg_learner(alg, seed=seed, target_update_interval=2, **overrides)
    for step, batch in zip(range(n_steps), batches() * n_steps):
        train_step(learner, batch, step)
    return learner, logger


@pytest.mark.parametrize("alg", ALGS)
def test_fused_and_stepwise_unroll_train_alike(alg):
    fused, fused_log = train_steps(alg, train_unroll="fused")
    stepwise, stepwise_log = train_steps(alg, train_unroll="stepwise")
    for name, network in policy_networks(fused).items():
        for a, b in zip(network.parameters(), policy_networks(stepwise)[name].parameters(), strict=True):
            assert th.allclose(a, b, rtol=1e-3, atol=2e-4), name


@pytest.mark.parametrize("alg", ALGS)
def test_save_and_load_continue_exactly(alg, tmp_path):
    trained, _ = train_steps(alg)
    restored = saved_and_restored(alg, trained, tmp_path, policy_networks)
    for learner in (trained, restored):  # the optimisers' moments and the counters came back too
        train_step(learner, copy.deepcopy(batches()[0]), 10)
    assert same_networks(restored, trained)


# What a short run of each README command needs besides test_readme's SHORT settings.
SHORT_OVERRIDES = {"ippo": ["accumulated_episodes=2", "batch_size=2"], "dop": ["off_batch_size=4"],
                   "riit": ["off_batch_size=4", "buffer_size=4", "save_buffer=True"]}


def readme_commands() -> list:
    return test_readme.readme_commands("### Policy-based algorithms")


def logged_stats(results) -> set:
    """The stat names the one run under `results` logged (its info.json: the console prints them
    only at the next log_interval, which a short run may not reach)."""
    (info,) = [root for root, _, files in os.walk(results / "sacred") if "info.json" in files]
    return set(read_json(info, "info.json"))


def test_the_readme_runs_every_policy_algorithm_on_smac():
    commands = readme_commands()
    assert sorted(re.search(r"--config=(\w+) --env-config=sc2", command).group(1) for command in commands) == \
        sorted(ALGS)


@pytest.mark.parametrize("command", readme_commands())
def test_each_readme_command_runs_and_saves(command, tmp_path):
    """Each README command as written, shortened, saving its models. IPPO trains from its first
    batch (with its accumulated_episodes of 8 so short a run might never train)."""
    alg = re.search(r"--config=(\w+)", command).group(1)
    proc = run_main(*shortened(command, str(tmp_path), ""), "save_model=True", "save_model_interval=100",
                    *SHORT_OVERRIDES.get(alg, []))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "critic_loss" in logged_stats(tmp_path)  # the learner trained and logged
    (token,) = os.listdir(tmp_path / "models")
    assert token.startswith(alg_args(alg).name) and len(os.listdir(tmp_path / "models" / token)) >= 2
    if alg == "riit":  # the on_off loop saves its off-policy buffer too
        last = max(os.listdir(tmp_path / "models" / token), key=int)
        assert "off_buffer.pt" in os.listdir(tmp_path / "models" / token / last)


def test_dop_runs_saves_both_buffers_and_resumes_from_the_command_line(tmp_path):
    proc = short_smac_run("dop", str(tmp_path), "off_batch_size=4", "save_buffer=True")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert {"critic_loss", "q_max_first"} <= logged_stats(tmp_path)  # the critic and the actors trained
    (token,) = os.listdir(tmp_path / "models")
    saved = str(tmp_path / "models" / token)
    last = max(os.listdir(saved), key=int)
    assert {"buffer.pt", "off_buffer.pt", "mixer.th", "mixer_opt.th"} <= set(os.listdir(os.path.join(saved, last)))
    resumed = short_smac_run("dop", str(tmp_path), "off_batch_size=4", "save_buffer=True", "t_max=180",
                             "resume=True", f"checkpoint_path={saved}")
    assert resumed.returncode == 0 and "Resumed at t_env" in resumed.stderr, resumed.stderr[-3000:]
    assert "the checkpoint has no replay buffer" not in resumed.stderr  # both buffers came back
    assert max(int(name) for name in os.listdir(saved)) >= 180


def test_coma_runs_saves_and_resumes_from_the_command_line(tmp_path):
    proc = short_smac_run("coma", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    (token,) = os.listdir(tmp_path / "models")
    saved = str(tmp_path / "models" / token)
    assert token.startswith(alg_args("coma").name) and len(os.listdir(saved)) >= 2
    resumed = short_smac_run("coma", str(tmp_path), "t_max=240", "resume=True", f"checkpoint_path={saved}")
    assert resumed.returncode == 0 and "Resumed at t_env" in resumed.stderr, resumed.stderr[-3000:]
    assert max(int(name) for name in os.listdir(saved)) >= 240


# --- learning ---------------------------------------------------------------------------------------

MATRIX_GAME_SHORT = dict(epsilon_anneal_time=500, runner="parallel", batch_size_run=8, buffer_size=8, batch_size=8,
                         test_interval=200, runner_log_interval=200, learner_log_interval=200)


def train_in_process(alg: str, env: str, seed: int, env_args: dict | None = None, **overrides) -> dict:
    """Train `alg` on `env` as main.py would (its config and seeding, without the process start and sacred)
    and return the logged stats, key -> values in order."""
    config = build_config(["main.py", f"--config={alg}", f"--env-config={env}"])
    config.update(overrides, seed=seed, env_args={**config["env_args"], **(env_args or {}), "seed": seed},
                  use_cuda=False, log_interval=10 * overrides["t_max"])  # no print: it would clear the stats
    args = SimpleNamespace(**args_sanity_check(config, LOG), device="cpu", unique_token=f"{alg}_{seed}")
    random.seed(seed)
    np.random.seed(seed)
    th.manual_seed(seed)
    logger = Logger(LOG)
    runner = runner_REGISTRY[args.runner](args=args, logger=logger)
    try:
        buffer, learner = setup_learning(args, runner, logger)
        LOOPS[args.run](args, runner, buffer, learner, logger).run()
    finally:
        runner.close_env()
    return {key: [value for _, value in values] for key, values in logger.stats.items()}


def test_coma_finds_the_optimum_of_the_nonmonotonic_matrix_game():
    """COMA's centralised critic values the joint action, so it finds the payoff of 12 that QMIX's
    monotonic mixing misses. Measured (t_max 600, seeds 0-5): greedy test return 0 at the start, 12 from
    t_env 200 on; training return (epsilon falling to 0.01 at t_env 500) -0.05-1.48 at the start,
    5.54-9.88 at t_env 600."""
    stats = train_in_process("coma", "one_step_matrix_game", seed=3, t_max=600, **MATRIX_GAME_SHORT)
    assert stats["test_return_mean"][-1] == pytest.approx(12.0) and stats["return_mean"][-1] >= 4.0


def test_ippo_learns_the_monotonic_matrix_game():
    """Independent PPO finds the dominant joint action (0, 0) of the monotonic matrix. Measured (seeds 0-5,
    t_max 400): training return (sampled actions, no epsilon) 0.38-4.88 at the start, 11.70-11.88 at
    t_env 400; greedy test return 12 from t_env 200 on (one seed's first test: 3)."""
    stats = train_in_process("ippo", "one_step_matrix_game", seed=3, env_args={"matrix": "monotonic"}, t_max=400,
                             **MATRIX_GAME_SHORT)
    assert stats["return_mean"][-1] >= 10.5 and stats["test_return_mean"][-1] == pytest.approx(12.0)


def test_lica_finds_the_optimum_of_the_nonmonotonic_matrix_game():
    """LICA's critic mixes the joint action distribution without a monotonicity constraint, so the policies
    climbing it find the payoff of 12. Measured (t_max 600, seeds 0-5): training return (sampled actions)
    -0.06-1.46 at the start, 11.88-12.0 at t_env 600; greedy test return 12 from t_env 200 on."""
    stats = train_in_process("lica", "one_step_matrix_game", seed=3, t_max=600, **MATRIX_GAME_SHORT)
    assert stats["return_mean"][-1] >= 10.5 and stats["test_return_mean"][-1] == pytest.approx(12.0)


def test_dop_finds_the_optimum_of_the_nonmonotonic_matrix_game():
    """DOP's greedy policies find the payoff of 12. Measured (t_max 600, off-policy batches of 8 from a
    64-episode buffer, seeds 0-5): training return (epsilon falling to 0.05 at t_env 500, applied twice)
    1.44-4.45 at the start, 9.28-10.19 at t_env 600; greedy test return 12 from t_env 200 on (one seed's
    first test: 0)."""
    stats = train_in_process("dop", "one_step_matrix_game", seed=3, t_max=600, off_batch_size=8, off_buffer_size=64,
                             **MATRIX_GAME_SHORT)
    assert stats["return_mean"][-1] >= 8.0 and stats["test_return_mean"][-1] == pytest.approx(12.0)


@pytest.mark.parametrize("alg, overrides", [("riit", dict(off_batch_size=8, off_buffer_size=64)), ("riit_online", {})])
def test_riit_finds_the_optimum_of_the_nonmonotonic_matrix_game(alg, overrides):
    """RIIT's critics value each agent's action distribution and the policies climb their QMIX mixture to the
    payoff of 12. Measured (t_max 600, seeds 0-5; riit: off-policy batches of 8 from a 64-episode buffer):
    training return (sampled actions) -0.05-2.96 at the start, 11.46-12.0 at t_env 600 for both; greedy test
    return 12 from t_env 200 on."""
    stats = train_in_process(alg, "one_step_matrix_game", seed=3, t_max=600, **overrides, **MATRIX_GAME_SHORT)
    assert stats["return_mean"][-1] >= 10.5 and stats["test_return_mean"][-1] == pytest.approx(12.0)


def test_vmix_finds_the_optimum_of_the_nonmonotonic_matrix_game():
    """QMIX-mixed state values learn the joint value well enough for the policies to find the payoff of 12.
    Measured (t_max 600, seeds 0-5): training return (epsilon falling to 0 at t_env 500) -0.06-2.96 at the
    start, 11.58-11.82 at t_env 600; greedy test return 12 from t_env 200 on."""
    stats = train_in_process("vmix", "one_step_matrix_game", seed=3, t_max=600, **MATRIX_GAME_SHORT)
    assert stats["return_mean"][-1] >= 10.5 and stats["test_return_mean"][-1] == pytest.approx(12.0)
