"""MAPPO as the SMACv2 paper ran it (preset mappo_smacv2: benellis3/mappo's trust_region_learner): GAE with
lambda 0.995 and the advantage normalisation against hand computation, the ratio clamp and clip, the
critic-first schedule, the actor's lr annealing, the running normalisation (NumPy's numbers, applied while
acting, saved and loaded), truncated backpropagation, bad settings, a run from the command line and a
learning check on the one-step matrix game."""
import copy
import os

import numpy as np
import pytest
import torch as th

from components.episode_buffer import EpisodeBatch
from controllers import REGISTRY as mac_REGISTRY
from learners.ppo_learner import clipped_surrogate_loss, normalise_advantages
from learners.q_learner import batch_transitions
from learners.trust_region_learner import MAX_RATIO, living_agents
from main import build_config
from main_runs import run_main
from test_learner import N_ACTIONS, OBS_DIM, make_scheme
from test_policy_algorithms import MATRIX_GAME_SHORT, logged_stats, train_in_process
from test_value_algorithms import alg_args, make_alg_learner, saved_and_restored
from utils.config_check import range_error
from utils.running_stats import RunningNormaliser

th.set_num_threads(1)

ALG = "mappo_smacv2"
N_AGENTS = 3
STEPS = (26, 9, 30)  # transitions of the three episodes of `episodes`
DIES_AT = 10  # agent 0 of episode 0 is dead from this step on
STATS = {"critic_loss", "critic_grad_norm", "target_mean", "actor_loss", "entropy", "agent_grad_norm",
         "advantage_mean", "lr", "critic_lr"}


def episodes(seed: int = 0) -> EpisodeBatch:
    """Three episodes of STEPS transitions as SMAC stores them (the no-op, action 0, available to the dead
    only): the first terminates, agent 0 dying at step DIES_AT; the second terminates early; the third is cut
    by the limit (not terminal). Observations and states far from mean 0 and variance 1."""
    gen = th.Generator().manual_seed(seed)
    scheme, groups, preprocess = make_scheme(N_AGENTS, N_ACTIONS, 2 * N_AGENTS, OBS_DIM)
    batch = EpisodeBatch(scheme, groups, len(STEPS), max(STEPS) + 1, preprocess=preprocess)
    for episode, n_steps in enumerate(STEPS):
        avail = th.ones(n_steps + 1, N_AGENTS, N_ACTIONS, dtype=th.int)  # [t, agents, actions]
        avail[:, :, 0] = 0
        actions = th.randint(1, N_ACTIONS, (n_steps + 1, N_AGENTS, 1), generator=gen)  # [t, agents, 1]
        if episode == 0:
            avail[DIES_AT:, 0] = th.tensor([1] + [0] * (N_ACTIONS - 1), dtype=th.int)
            actions[DIES_AT:, 0] = 0
        terminated = th.zeros(n_steps, 1, dtype=th.uint8)
        terminated[-1] = int(episode < 2)
        batch.update({"state": 5.0 + 3.0 * th.randn(n_steps + 1, 2 * N_AGENTS, generator=gen),
                      "obs": -2.0 + 4.0 * th.randn(n_steps + 1, N_AGENTS, OBS_DIM, generator=gen),
                      "avail_actions": avail, "actions": actions}, bs=episode, ts=slice(0, n_steps + 1))
        batch.update({"reward": th.rand(n_steps, 1, generator=gen), "terminated": terminated},
                     bs=episode, ts=slice(0, n_steps))
    return batch


def mappo_learner(seed: int = 0, **overrides) -> tuple:
    return make_alg_learner(ALG, seed=seed, n_agents=N_AGENTS, **overrides)


def learner_networks(learner) -> dict:
    """The agent, the critic (with its state statistics) and the observation statistics, by file name."""
    return {"agent": learner.mac.agent, **learner.networks}


def recorded_actor_calls(learner) -> list:
    """The arguments of every _train_actor call of `learner` from now on (the call still runs)."""
    calls, train_actor = [], learner._train_actor

    def record(*args):
        calls.append(args)
        return train_actor(*args)

    learner._train_actor = record
    return calls


# --- the preset -------------------------------------------------------------------------------------

def test_the_preset_holds_the_paper_runs_values():
    config = build_config([f"--config={ALG}", "--env-config=sc2v2", "with", "env_args.map_name=protoss_5_vs_5"])
    expected = {"learner": "trust_region_learner", "critic_type": "centralV_rnn_critic", "agent": "rnn",
                "rnn_hidden_dim": 64, "obs_agent_id": True, "obs_last_action": False,
                "action_selector": "soft_policies", "batch_size_run": 8, "batch_size": 8, "buffer_size": 8,
                "lr": 0.0005, "critic_lr": 0.001, "optim_eps": 1e-5, "gamma": 0.99, "gae_lambda": 0.995,
                "mini_epochs_critic": 10, "mini_epochs_actor": 10, "eps_clip": 0.1, "entropy_coef": 0.0,
                "grad_norm_clip": float("inf"), "detach_every": 20, "normalise_obs": True, "test_nepisode": 32,
                "test_interval": 10000, "t_max": 10050000}
    assert {key: config[key] for key in expected} == expected


def test_bad_settings_give_one_line():
    with pytest.raises(ValueError, match="critic_type='cv_critic': trust_region_learner takes centralV_rnn_critic"):
        mappo_learner(critic_type="cv_critic")
    with pytest.raises(ValueError, match="train_unroll=stepwise: trust_region_learner"):
        mappo_learner(train_unroll="stepwise")
    with pytest.raises(ValueError, match="normalise_obs=True needs a learner that updates"):
        make_alg_learner("qmix", normalise_obs=True)
    assert range_error({"detach_every": 0}) == "detach_every=0 must be at least 1"
    assert range_error({"mini_epochs_actor": 0}) == "mini_epochs_actor=0 must be at least 1"


# --- the update ---------------------------------------------------------------------------------------

def gae_by_hand(rewards, terminated, values, lengths, gamma, lam):
    """benellis3/mappo's backward recursion, one (episode, agent) at a time, over each episode's transitions;
    a non-terminal last transition bootstraps from the last stored step's value."""
    bs, steps, n = rewards.shape[0], rewards.shape[1], values.shape[2]
    advantages = np.zeros((bs, steps, n))
    for b in range(bs):
        for i in range(n):
            running = 0.0
            for t in reversed(range(lengths[b])):
                not_done = 1.0 - terminated[b, t]
                delta = rewards[b, t] + gamma * values[b, t + 1, i] * not_done - values[b, t, i]
                running = delta + gamma * lam * not_done * running
                advantages[b, t, i] = running
    return advantages


def test_gae_with_lambda_0995_matches_a_hand_computation():
    learner, _ = mappo_learner()
    assert (learner.args.gamma, learner.args.gae_lambda) == (0.99, 0.995)
    batch = episodes()
    data = batch_transitions(batch)
    values = th.randn(batch.batch_size, batch.max_seq_length, N_AGENTS, generator=th.Generator().manual_seed(1))
    advantages, targets = learner._gae(values, data)  # [bs, T-1, n]
    expected = gae_by_hand(data.rewards[..., 0].numpy(), data.terminated[..., 0].numpy(), values.numpy(), STEPS,
                           0.99, 0.995)
    valid = data.mask.expand_as(advantages).bool()
    np.testing.assert_allclose(advantages[valid].numpy(), expected[valid.numpy()], rtol=1e-4, atol=1e-5)
    assert th.allclose(targets, values[:, :-1] + advantages)
    assert advantages[~valid].eq(0).all()


def test_living_agents_are_those_with_an_action_besides_the_no_op():
    batch = episodes()
    living = living_agents(batch["avail_actions"])  # [bs, T, n]
    assert living[0, :DIES_AT].all() and not living[0, DIES_AT:, 0].any() and living[0, DIES_AT:STEPS[0] + 1, 1:].all()
    assert living[1, :STEPS[1] + 1].all() and not living[1, STEPS[1] + 1:].any()  # padding: nothing available


def test_advantages_are_normalised_over_the_living_agents_valid_steps():
    learner, _ = mappo_learner()
    calls = recorded_actor_calls(learner)
    batch = episodes()
    learner.train(batch, t_env=0, episode_num=0)
    (_, _, _, _, advantages, mask, _), = calls
    data = batch_transitions(batch)
    assert th.equal(mask, data.mask * living_agents(batch["avail_actions"])[:, :-1])
    assert mask[0, DIES_AT:, 0].eq(0).all() and mask[2].eq(1).all()  # the dead agent's steps are left out
    entries = advantages[mask.bool()]
    assert entries.mean().item() == pytest.approx(0.0, abs=1e-5)
    assert entries.std().item() == pytest.approx(1.0, rel=1e-4)


def test_the_ratio_is_clamped_to_16_before_the_clip():
    """Entries (ratio, A): (30, -1) clamped to 16, below the clipped -1.1: -16; (1.5, 2): min(3, 2.2) = 2.2;
    (0.5, -1): min(-0.5, -0.9) = -0.9; (0.5, 1): min(0.5, 0.9) = 0.5. The loss is minus their mean."""
    ratios = th.tensor([30.0, 1.5, 0.5, 0.5])
    advantages = th.tensor([-1.0, 2.0, -1.0, 1.0])
    log_pi = th.log(ratios).requires_grad_()
    old_log_pi, mask = th.zeros(4), th.ones(4)
    loss = clipped_surrogate_loss(log_pi, old_log_pi, advantages, 0.1, mask, max_ratio=MAX_RATIO)
    assert MAX_RATIO == 16.0
    assert loss.item() == pytest.approx(-(-16.0 + 2.2 - 0.9 + 0.5) / 4, rel=1e-6)
    loss.backward()
    assert log_pi.grad[0] == 0 and log_pi.grad[1] == 0 and log_pi.grad[2] == 0  # clamped, clipped, clipped
    assert log_pi.grad[3].item() == pytest.approx(-0.5 / 4)  # d(-r A / 4) / d log r = -r A / 4
    unclamped = clipped_surrogate_loss(th.log(ratios), old_log_pi, advantages, 0.1, mask)
    assert unclamped.item() == pytest.approx(-(-30.0 + 2.2 - 0.9 + 0.5) / 4, rel=1e-6)


def test_the_critic_steps_first_and_its_new_values_give_the_advantages():
    learner, logger = mappo_learner()
    calls = recorded_actor_calls(learner)
    batch = episodes()
    critic_before, agent_before = copy.deepcopy(learner.critic), copy.deepcopy(learner.mac.agent.state_dict())
    learner.train(batch, t_env=0, episode_num=0)
    (_, _, _, _, advantages, mask, _), = calls
    data = batch_transitions(batch)
    inputs = learner.critic.build_inputs(batch, learner.mac.normalise_obs(batch["obs"]))  # [bs, T, n, input]
    with th.no_grad():
        after = normalise_advantages(learner._gae(learner.critic(inputs), data)[0], mask)
        before = normalise_advantages(learner._gae(critic_before(inputs), data)[0], mask)
    assert th.allclose(advantages, after, atol=1e-5)
    assert not th.allclose(advantages[mask.bool()], before[mask.bool()], atol=1e-3)
    assert any(not th.equal(agent_before[key], value) for key, value in learner.mac.agent.state_dict().items())
    assert STATS <= set(logger.stats)


def test_the_actor_lr_falls_linearly_to_zero_and_the_critics_stays():
    learner, logger = mappo_learner()
    t_max = learner.args.t_max
    assert learner.annealed_lr(0) == 0.0005
    assert learner.annealed_lr(t_max // 2) == pytest.approx(0.00025)
    assert learner.annealed_lr(t_max) == 0.0 and learner.annealed_lr(t_max + 100) == 0.0
    learner.train(episodes(), t_env=t_max // 2, episode_num=0)
    assert learner.agent_optimiser.param_groups[0]["lr"] == pytest.approx(0.00025)
    assert learner.critic_optimiser.param_groups[0]["lr"] == 0.001
    assert logger.stats["lr"] == [(t_max // 2, pytest.approx(0.00025))]
    assert logger.stats["critic_lr"] == [(t_max // 2, 0.001)]


def test_lr_anneal_time_keeps_the_papers_schedule_in_a_shorter_run():
    """The paper anneals over its 10.05M steps: a 1M-step run of its schedule ends at 0.9 of the lr, not at 0."""
    learner, _ = mappo_learner()
    learner.args.lr_anneal_time = 10_050_000
    assert learner.annealed_lr(1_005_000) == pytest.approx(0.0005 * 0.9)
    assert learner.annealed_lr(10_050_000) == 0.0


# --- the running normalisation ----------------------------------------------------------------------

def running_by_hand(batches: list, count: float = 1e-4) -> tuple:
    """benellis3/mappo's running mean and variance in NumPy: from mean 0, variance 1 and count 1e-4, each
    batch merged by its mean and unbiased variance."""
    mean, var = np.zeros(batches[0].shape[1]), np.ones(batches[0].shape[1])
    for batch in batches:
        batch_mean, batch_var, n = batch.mean(0), batch.var(0, ddof=1), batch.shape[0]
        delta, total = batch_mean - mean, count + n
        var = (var * count + batch_var * n + delta ** 2 * count * n / total) / total
        mean, count = mean + delta * n / total, total
    return mean, var, count


def test_the_running_normaliser_matches_numpy():
    gen = np.random.default_rng(0)
    batches = [gen.normal(3.0, 2.0, size=(n, 4)) for n in (50, 7, 120)]
    normaliser = RunningNormaliser(4)
    for batch in batches:
        normaliser.update(th.tensor(batch, dtype=th.float32))
    mean, var, count = running_by_hand(batches)
    np.testing.assert_allclose(normaliser.mean.numpy(), mean, rtol=1e-5)
    np.testing.assert_allclose(normaliser.var.numpy(), var, rtol=1e-5)
    assert normaliser.count.item() == pytest.approx(count)
    everything = np.concatenate(batches)  # the whole's statistics, up to the merge of unbiased variances
    np.testing.assert_allclose(normaliser.mean.numpy(), everything.mean(0), rtol=1e-5)
    np.testing.assert_allclose(normaliser.var.numpy(), everything.var(0), rtol=0.05)
    x = th.tensor(batches[1], dtype=th.float32)
    np.testing.assert_allclose(normaliser(x).numpy(), (batches[1] - mean) / np.sqrt(var + 1e-6), rtol=1e-4)
    normaliser.update(x[:1])  # one sample has no unbiased variance: nothing changes
    assert normaliser.count.item() == pytest.approx(count)


def test_the_learner_updates_the_statistics_from_living_agents_and_valid_states():
    learner, _ = mappo_learner()
    batch = episodes()
    learner.train(batch, t_env=0, episode_num=0)
    living = living_agents(batch["avail_actions"])
    valid = batch_transitions(batch).mask[..., 0].bool()  # [bs, T-1]
    obs_mean, _, _ = running_by_hand([batch["obs"][living].numpy()])
    state_mean, state_var, _ = running_by_hand([batch["state"][:, :-1][valid].numpy()])
    np.testing.assert_allclose(learner.mac.obs_normaliser.mean.numpy(), obs_mean, rtol=1e-5)
    np.testing.assert_allclose(learner.critic.state_normaliser.mean.numpy(), state_mean, rtol=1e-5)
    np.testing.assert_allclose(learner.critic.state_normaliser.var.numpy(), state_var, rtol=1e-5)


def test_observations_are_normalised_while_acting():
    learner, _ = mappo_learner()
    batch = episodes()
    learner.train(batch, t_env=0, episode_num=0)
    stats = learner.mac.obs_normaliser
    plain_args = alg_args(ALG, N_AGENTS, normalise_obs=False)
    scheme, groups, _ = make_scheme(N_AGENTS, N_ACTIONS, 2 * N_AGENTS, OBS_DIM)
    plain = mac_REGISTRY[plain_args.mac](scheme, groups, plain_args)
    plain.load_state(learner.mac)
    normalised = copy.deepcopy(batch)
    normalised["obs"][:] = (batch["obs"] - stats.mean) / th.sqrt(stats.var + 1e-6)
    with th.no_grad():
        learner.mac.init_hidden(batch.batch_size)
        plain.init_hidden(batch.batch_size)
        for t in range(3):
            acting = learner.mac.forward(batch, t, test_mode=True)  # [bs, n, n_actions]
            assert th.allclose(acting, plain.forward(normalised, t, test_mode=True), atol=1e-6)
    assert not th.allclose(plain.forward_sequence(batch), learner.mac.forward_sequence(batch))


def test_networks_optimisers_and_statistics_are_saved_and_loaded(tmp_path):
    trained, _ = mappo_learner()
    for step in range(2):
        trained.train(episodes(step), t_env=step, episode_num=step)
    assert {"critic.th", "obs_normaliser.th", "agent_opt.th", "critic_opt.th"} <= set(trained.model_files())
    restored = saved_and_restored(ALG, trained, tmp_path, learner_networks)
    assert th.equal(restored.mac.obs_normaliser.var, trained.mac.obs_normaliser.var)
    assert th.equal(restored.critic.state_normaliser.mean, trained.critic.state_normaliser.mean)
    for learner in (trained, restored):  # the optimisers' moments came back too
        learner.train(episodes(5), t_env=10, episode_num=2)
    assert all(th.equal(a, b) for a, b in zip(trained.mac.agent.parameters(), restored.mac.agent.parameters()))
    assert all(th.equal(a, b) for a, b in zip(trained.critic.parameters(), restored.critic.parameters()))


# --- truncated backpropagation ----------------------------------------------------------------------

@pytest.mark.parametrize("network", ["actor", "critic"])
def test_no_gradient_crosses_a_20_step_boundary(network):
    learner, _ = mappo_learner()
    assert learner.args.detach_every == 20
    batch = episodes()
    if network == "actor":
        inputs = learner.mac.build_sequence_inputs(batch).detach()  # [bs, T, n, input]
        run = lambda x: learner._log_policies(x, batch["avail_actions"])  # noqa: E731
    else:
        inputs = learner.critic.build_inputs(batch, batch["obs"]).detach()
        run = learner.critic
    inputs.requires_grad_()
    outputs = run(inputs)
    outputs[2, 25].sum().backward()
    grads = inputs.grad[2].abs().sum(dim=(-2, -1))  # [T]: the gradient reaching each step's inputs
    assert grads[:20].eq(0).all() and grads[20:26].gt(0).all() and grads[26:].eq(0).all()
    full = learner.critic.network if network == "critic" else learner.mac.agent
    with th.no_grad():
        untruncated = full.forward_sequence(inputs)  # the values do not change
        truncated = full.forward_sequence(inputs, detach_every=20)
    assert th.allclose(untruncated, truncated)
    inputs.grad = None
    full.forward_sequence(inputs)[2, 25].sum().backward()
    assert inputs.grad[2, :20].abs().sum() > 0  # without the truncation the gradient goes back to step 0


# --- runs ---------------------------------------------------------------------------------------------

def test_runs_from_the_command_line_saves_evaluates_and_resumes(tmp_path):
    """On the small stag hunt (episodes up to 25 steps: the 20-step truncation applies), then the saved
    checkpoint evaluated, its normalisation statistics loaded, and the run resumed from it to its new t_max
    (its final checkpoint shows how far it got)."""
    common = ["--config=mappo_smacv2", "--env-config=small_stag_hunt", "with", "use_cuda=False",
              f"local_results_path={tmp_path}", "test_nepisode=8", "rnn_hidden_dim=16"]
    proc = run_main(*common, "t_max=250", "test_interval=200", "save_model=True",
                    "save_model_interval=200")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert STATS <= logged_stats(tmp_path)
    (token,) = os.listdir(tmp_path / "models")
    saved = tmp_path / "models" / token
    last = max(os.listdir(saved), key=int)
    assert {"agent.th", "critic.th", "obs_normaliser.th", "agent_opt.th", "critic_opt.th"} <= set(
        os.listdir(saved / last))
    evaluated = run_main(*common, "evaluate=True", f"checkpoint_path={saved}")
    assert evaluated.returncode == 0 and "Loading model from" in evaluated.stderr, evaluated.stderr[-3000:]
    resumed = run_main(*common, "t_max=450", "test_interval=200", "resume=True", f"checkpoint_path={saved}",
                       "save_model=True", "save_model_interval=1000")
    assert resumed.returncode == 0 and f"Resumed at t_env {last}," in resumed.stderr, resumed.stderr[-3000:]
    models = tmp_path / "models"
    final = max(int(step) for token in os.listdir(models) for step in os.listdir(models / token))
    assert final > 450


def test_finds_the_optimum_of_the_nonmonotonic_matrix_game():
    """The central critic values the joint action, and the policies find the payoff of 12. Measured (t_max
    400, 8 envs, seeds 0-5): training return 1.44-4.46 at the start, 11.64-11.94 at t_env 400; test return
    (32 sampled episodes) 0.33-2.2 at the start, 12.0 at t_env 400."""
    stats = train_in_process(ALG, "one_step_matrix_game", seed=3, t_max=400,
                             **{**MATRIX_GAME_SHORT, "test_nepisode": 32})
    assert stats["test_return_mean"][0] <= 6.0
    assert stats["return_mean"][-1] >= 10.5 and stats["test_return_mean"][-1] >= 11.5
