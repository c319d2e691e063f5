"""PyMARL2's policy-gradient algorithms (COMA): the multinomial selector's sampling, the losses on small
hand-built tensors, shapes for several agent counts, exact save and load, runs from the command line
on 3m with a resume, and a learning check on the one-step matrix game."""
import copy
import os
from types import SimpleNamespace

import pytest
import torch as th

from components.action_selectors import REGISTRY as selector_REGISTRY
from learners.coma_learner import counterfactual_advantages, entropy, renormalise_available
from learners.q_learner import Transitions
from main_runs import read_json, run_dir, run_main
from test_learner import make_batch
from test_value_algorithms import alg_args, batches, make_alg_learner, short_smac_run
from utils.rl_utils import build_gae_targets

th.set_num_threads(1)

ALGS = ["coma"]
# What each learner logs, under PyMARL2's names.
STATS = {
    "coma_learner": {"critic_loss", "critic_grad_norm", "td_error_abs", "q_taken_mean", "target_mean",
                     "advantage_mean", "coma_loss", "agent_grad_norm", "pi_max"},
}


def policy_networks(learner) -> dict:
    """Every network of a policy learner (the agent, its critics and their targets), by name."""
    targets = {f"target/{name}": network for name, network in learner.target_networks.items()}
    return {"agent": learner.mac.agent, **learner.networks, **targets}


def same_networks(a, b) -> bool:
    nets_a, nets_b = policy_networks(a), policy_networks(b)
    return nets_a.keys() == nets_b.keys() and all(
        all(th.equal(x, y) for x, y in zip(nets_a[name].state_dict().values(), nets_b[name].state_dict().values()))
        for name in nets_a)


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
    entropies = [-(0.25 * th.log(th.tensor(0.25)) + 0.75 * th.log(th.tensor(0.75))).item(), th.log(th.tensor(2.0)).item()]
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


# --- every algorithm: shapes, save and load, the command line -----------------------------------------

@pytest.mark.parametrize("n_agents", [2, 3, 5])
@pytest.mark.parametrize("alg", ALGS)
def test_each_algorithm_trains_on_batches_of_several_agent_counts(alg, n_agents):
    learner, logger = make_alg_learner(alg, n_agents=n_agents)
    before = copy.deepcopy(learner.mac.agent.state_dict())
    batch = make_batch(0, n_agents=n_agents, state_dim=2 * n_agents)
    for step in range(3):
        learner.train(batch, t_env=step, episode_num=step)
    assert STATS[alg_args(alg).learner] <= set(logger.stats)
    assert all(th.isfinite(th.tensor([value for _, value in values])).all() for values in logger.stats.values())
    assert any(not th.equal(before[key], value) for key, value in learner.mac.agent.state_dict().items())


def train_steps(alg: str, n_steps: int = 3, seed: int = 0, **overrides):
    learner, logger = make_alg_learner(alg, seed=seed, target_update_interval=2, **overrides)
    for step, batch in zip(range(n_steps), batches() * n_steps):
        learner.train(batch, t_env=step, episode_num=step)
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
    trained.save_models(str(tmp_path))
    assert all(os.path.exists(tmp_path / name) for name in trained.model_files())
    restored, _ = make_alg_learner(alg, seed=1, target_update_interval=2)
    assert not same_networks(restored, trained)
    restored.load_models(str(tmp_path))
    restored.load_target_models(str(tmp_path))
    restored.load_state_dict(trained.state_dict())
    assert same_networks(restored, trained)
    for learner in (trained, restored):  # the optimisers' moments and the counters came back too
        learner.train(copy.deepcopy(batches()[0]), t_env=10, episode_num=3)
    assert same_networks(restored, trained)


def test_coma_runs_saves_resumes_and_evaluates_from_the_command_line(tmp_path):
    proc = short_smac_run("coma", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    (token,) = os.listdir(tmp_path / "models")
    saved = str(tmp_path / "models" / token)
    assert token.startswith(alg_args("coma").name) and len(os.listdir(saved)) >= 2
    resumed = short_smac_run("coma", str(tmp_path), "t_max=240", "resume=True", f"checkpoint_path={saved}")
    assert resumed.returncode == 0 and "Resumed at t_env" in resumed.stderr, resumed.stderr[-3000:]
    assert max(int(name) for name in os.listdir(saved)) >= 240
    evaluated = run_main("--config=coma", "--env-config=sc2", "with", "env_args.map_name=3m", "evaluate=True",
                         "test_nepisode=2", "batch_size_run=2", "use_cuda=False", f"checkpoint_path={saved}",
                         f"local_results_path={tmp_path}")
    assert evaluated.returncode == 0 and "Evaluation: 2 episodes" in evaluated.stderr, evaluated.stderr[-3000:]


# --- learning ---------------------------------------------------------------------------------------

MATRIX_GAME_SHORT = ["t_max=600", "epsilon_anneal_time=500", "runner=parallel", "batch_size_run=8", "buffer_size=8",
                     "batch_size=8", "test_interval=200", "log_interval=200", "learner_log_interval=200",
                     "runner_log_interval=200", "use_cuda=False"]


def test_coma_finds_the_optimum_of_the_nonmonotonic_matrix_game(tmp_path):
    """COMA's centralised critic values the joint action, so it finds the payoff of 12 that QMIX's
    monotonic mixing misses. Measured (t_max 1000, seeds 1-6): greedy return 12 at every test from
    t_env 200 on; here t_max 600 and seed 3."""
    proc = run_main("--config=coma", "--env-config=one_step_matrix_game", "with", "seed=3",
                    f"local_results_path={tmp_path}", *MATRIX_GAME_SHORT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = read_json(run_dir(str(tmp_path), "one_step_matrix_game", alg_args("coma").name, 1), "info.json")
    assert info["test_return_mean"][-1] == pytest.approx(12.0)
