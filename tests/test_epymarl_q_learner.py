"""EPyMARL's Q-learner (epymarl_q_learner: iql_epymarl, vdn_epymarl, qmix_epymarl, iql_ns, vdn_ns, qmix_ns) on
hand-built batches: its loss against PyMARL2's q_learner's, standardised rewards and returns, per-agent
rewards, the target schedule in training steps, its saved state; and each config from the command line."""
import copy

import numpy as np
import pytest
import torch as th

from components.episode_buffer import EpisodeBatch
from main_runs import read_json, run_dir, run_main, train_on_spread
from run.run import build_scheme
from test_learner import N_ACTIONS, N_AGENTS, OBS_DIM, STATE_DIM, build_learner, make_args, make_batch
from utils.running_stats import RunningMeanStd

th.set_num_threads(1)


def epymarl_args(**overrides):
    """qmix_epymarl's settings on the small test env of test_learner."""
    settings = dict(agent="rnn", mac="basic_mac", use_rnn=False, obs_last_action=False, mixer="qmix",
                    hypernet_layers=2, learner="epymarl_q_learner", common_reward=True, double_q=True,
                    standardise_rewards=False, standardise_returns=False, target_update_interval_or_tau=200)
    return make_args(**{**settings, **overrides})


def make_learner(name: str = "epymarl_q_learner", seed: int = 0, common_reward: bool = True, **overrides):
    th.manual_seed(seed)
    return build_learner(name, epymarl_args(common_reward=common_reward, **overrides), common_reward)


def per_agent_batch(seed: int = 0) -> EpisodeBatch:
    """make_batch's episodes with a reward per agent [T-1, n_agents]."""
    team = make_batch(seed)
    scheme, groups, preprocess = build_scheme({"n_agents": N_AGENTS, "n_actions": N_ACTIONS,
                                               "state_shape": STATE_DIM, "obs_shape": OBS_DIM}, common_reward=False)
    batch = EpisodeBatch(scheme, groups, team.batch_size, team.max_seq_length, preprocess=preprocess)
    for key in ("state", "obs", "avail_actions", "actions", "terminated", "filled"):
        batch.data.transition_data[key].copy_(team.data.transition_data[key])
    gen = th.Generator().manual_seed(seed + 1)
    batch.data.transition_data["reward"].copy_(th.rand(batch.data.transition_data["reward"].shape, generator=gen))
    return batch


@pytest.mark.parametrize("mixer", ["qmix", "vdn", None])
def test_the_loss_is_twice_pymarl2_q_learners_half_squared_error(mixer):
    """Same weights, same batch, no standardisation: the same one-step double-Q targets, without the 1/2."""
    epymarl, logger = make_learner(mixer=mixer)
    pymarl2, pymarl2_logger = make_learner("q_learner", mixer=mixer)
    batch = make_batch(seed=3)
    epymarl.train(batch, t_env=1, episode_num=1)
    pymarl2.train(batch, t_env=1, episode_num=1)
    assert logger.stats["loss"][0][1] == pytest.approx(2 * pymarl2_logger.stats["loss_td"][0][1], rel=1e-6)
    for key in ("td_error_abs", "q_taken_mean", "target_mean"):
        assert logger.stats[key][0][1] == pytest.approx(pymarl2_logger.stats[key][0][1], rel=1e-6), key
    assert "loss_td" not in logger.stats


def test_rewards_are_standardised_by_their_running_statistics():
    learner, _ = make_learner(standardise_rewards=True)
    stats = RunningMeanStd((1,))
    for seed in (0, 1):
        batch = make_batch(seed)
        rewards = batch["reward"][:, :-1]  # [bs, T-1, 1], padded steps included (as EPyMARL)
        stats.update(rewards)
        expected = (rewards - stats.mean) / th.sqrt(stats.var)
        assert th.allclose(learner._transitions(batch).rewards, expected)


def test_standardised_returns_scale_the_targets_and_back():
    """Targets y = r + gamma (1 - d) * (Q' de-standardised), then standardised by the returns' statistics."""
    plain, _ = make_learner(mixer=None)
    learner, _ = make_learner(mixer=None, standardise_returns=True)
    learner.standardisation.return_stats.mean = th.full((N_AGENTS,), 2.0)
    learner.standardisation.return_stats.var = th.full((N_AGENTS,), 9.0)
    batch = make_batch(4)
    data = plain._transitions(batch)
    mac_out, target_mac_out = plain._unroll(batch)
    with th.no_grad():
        target_q = plain._greedy_target_qvals(batch, mac_out, target_mac_out, start=1)  # [bs, T-1, n]
        unscaled = data.rewards + plain.args.gamma * (1 - data.terminated) * (target_q * 3.0 + 2.0)
        targets = learner._targets(batch, mac_out, target_mac_out, data)
    stats = RunningMeanStd((N_AGENTS,))
    stats.mean, stats.var = th.full((N_AGENTS,), 2.0), th.full((N_AGENTS,), 9.0)
    stats.update(unscaled)
    assert th.allclose(targets, (unscaled - stats.mean) / th.sqrt(stats.var), atol=1e-6)


def test_without_a_mixer_each_agent_learns_from_its_own_reward():
    learner, _ = make_learner(mixer=None, common_reward=False)
    batch = per_agent_batch()
    data = learner._transitions(batch)
    assert data.rewards.shape[-1] == N_AGENTS
    mac_out, target_mac_out = learner._unroll(batch)
    with th.no_grad():
        targets = learner._targets(batch, mac_out, target_mac_out, data)  # [bs, T-1, n_agents]
        target_q = learner._greedy_target_qvals(batch, mac_out, target_mac_out, start=1)
    assert th.allclose(targets, data.rewards + learner.args.gamma * (1 - data.terminated) * target_q)
    learner.train(batch, t_env=1, episode_num=1)


def test_a_mixer_with_per_agent_rewards_is_refused():
    with pytest.raises(ValueError, match="common_reward=False .* the qmix mixer learns one team value"):
        make_learner(common_reward=False)


def test_targets_are_copied_every_interval_of_training_steps():
    learner, logger = make_learner(target_update_interval_or_tau=3)
    batch = make_batch()
    copies = []
    for step in range(1, 8):
        learner.train(batch, t_env=step, episode_num=1)  # the episode count no longer decides
        same = all(th.equal(a, b) for a, b in zip(learner.target_mac.parameters(), learner.mac.parameters()))
        copies.append(same)
    assert copies == [False, False, True, False, False, True, False]
    assert learner.last_target_update_step == 6


def test_a_tau_at_most_one_moves_the_targets_softly_after_every_step():
    learner, _ = make_learner(target_update_interval_or_tau=0.25)
    before_mac = [p.detach().clone() for p in learner.target_mac.parameters()]
    before_mixer = [p.detach().clone() for p in learner.target_mixer.parameters()]
    learner.train(make_batch(), t_env=1, episode_num=1)
    for old, target, online in [*zip(before_mac, learner.target_mac.parameters(), learner.mac.parameters()),
                                *zip(before_mixer, learner.target_mixer.parameters(), learner.mixer.parameters())]:
        assert th.allclose(target, 0.75 * old + 0.25 * online)


def test_its_counters_and_statistics_are_saved_and_a_mismatched_setting_refused():
    learner, _ = make_learner(standardise_rewards=True, target_update_interval_or_tau=2)
    for step in range(3):
        learner.train(make_batch(step), t_env=step + 1, episode_num=1)
    state = copy.deepcopy(learner.state_dict())
    restored, _ = make_learner(standardise_rewards=True, target_update_interval_or_tau=2)
    restored.load_state_dict(state)
    assert (restored.training_steps, restored.last_target_update_step) == (3, 2)
    assert th.equal(restored.standardisation.reward_stats.mean, learner.standardisation.reward_stats.mean)
    other, _ = make_learner(standardise_rewards=False)
    with pytest.raises(ValueError, match="trained with standardise_rewards=True"):
        other.load_state_dict(state)


EPYMARL_Q_CONFIGS = [("iql_epymarl", None, "rnn", True), ("vdn_epymarl", "vdn", "rnn", False),
                     ("qmix_epymarl", "qmix", "rnn", False), ("iql_ns", None, "rnn_ns", False),
                     ("vdn_ns", "vdn", "rnn_ns", False), ("qmix_ns", "qmix", "rnn_ns", True)]


@pytest.mark.parametrize("config, mixer, agent, resume", EPYMARL_Q_CONFIGS)
def test_epymarl_value_configs_train_from_the_command_line(tmp_path, config, mixer, agent, resume):
    config_json, info = train_on_spread(tmp_path, config, config, resume, "buffer_size=4", "batch_size=2")
    assert (config_json["mixer"], config_json["agent"], config_json["learner"]) == (mixer, agent, "epymarl_q_learner")
    assert config_json["rnn_hidden_dim"] == 16  # EPyMARL's hidden_dim is the agent's width
    for key in ("loss", "td_error_abs", "q_taken_mean", "grad_norm", "test_return_mean"):
        assert np.all(np.isfinite(info[key])), key


def test_iql_learns_from_each_agents_reward_and_a_mixer_refuses_them(tmp_path):
    common = ["--env-config=gymma", "with", "env_args.key=lbforaging:Foraging-8x8-2p-3f-v3", "env_args.time_limit=20",
              "common_reward=False", "buffer_size=4", "batch_size=2", "test_nepisode=2", "test_interval=60",
              "log_interval=60", "runner_log_interval=60", f"local_results_path={tmp_path}", "t_max=100"]
    proc = run_main("--config=iql_epymarl", *common)
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = read_json(run_dir(str(tmp_path), "Foraging-8x8-2p-3f-v3", "iql_epymarl", 1), "info.json")
    assert info["agent_1_return_mean"] and np.all(np.isfinite(info["loss"]))
    refused = run_main("--config=qmix_epymarl", *common)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines()[-1].startswith(
        "main.py: error: common_reward=False (a reward per agent): the qmix mixer learns one team value")
