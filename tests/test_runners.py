"""Episode and parallel runners on a deterministic env (tests/countdown_env.py)."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch as th

from components.episode_buffer import EpisodeBatch
from controllers import REGISTRY as mac_REGISTRY
from countdown_env import EPISODE_LIMIT, N_ACTIONS, CountdownEnv, intended_length
from envs import REGISTRY as env_REGISTRY
from run.run import build_scheme
from runners import REGISTRY as runner_REGISTRY

th.set_num_threads(1)

BASE_SEED = 4  # worker seeds 4..7: lengths 3, 4, 5 (ends exactly at the limit), 5 (cut by the limit)
N_PARALLEL = 4


class RecordingLogger:
    """Logger stand-in: keeps every log_stat call."""

    def __init__(self):
        self.stats = {}
        self.console_logger = SimpleNamespace(warning=print, info=print)

    def log_stat(self, key, value, t, to_sacred=True):
        self.stats.setdefault(key, []).append((t, value))


class HighestAvailableMAC:
    """Deterministic controller: every agent takes its highest-numbered available action."""

    def __init__(self):
        self.action_selector = SimpleNamespace(epsilon=0.25)

    def init_hidden(self, batch_size):
        pass

    def select_actions(self, ep_batch, t_ep, t_env, bs=slice(None), test_mode=False):
        avail = ep_batch["avail_actions"][bs, t_ep]  # [len(bs), n_agents, n_actions]
        return (avail * th.arange(1, N_ACTIONS + 1)).argmax(dim=-1)  # [len(bs), n_agents]


@pytest.fixture(autouse=True)
def countdown_registered(monkeypatch):
    monkeypatch.setitem(env_REGISTRY, "countdown", CountdownEnv)


def make_args(runner: str, seed: int, batch_size_run: int, **env_args) -> SimpleNamespace:
    return SimpleNamespace(runner=runner, env="countdown", env_args=dict(env_args, seed=seed),
                           batch_size_run=batch_size_run, test_nepisode=batch_size_run,
                           runner_log_interval=1000, device="cpu")


def make_runner(args, mac=None, logger=None):
    runner = runner_REGISTRY[args.runner](args, logger or RecordingLogger())
    scheme, groups, preprocess = build_scheme(runner.get_env_info())
    runner.setup(scheme, groups, preprocess, mac or HighestAvailableMAC())
    return runner


@pytest.fixture(scope="module")
def parallel_batch():
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(env_REGISTRY, "countdown", CountdownEnv)
        runner = make_runner(make_args("parallel", BASE_SEED, N_PARALLEL))
        try:
            yield runner.run(test_mode=False)
        finally:
            runner.close_env()


def test_parallel_rows_equal_episode_runner_batches(parallel_batch):
    for i in range(N_PARALLEL):
        runner = make_runner(make_args("episode", BASE_SEED + i, 1))
        episode = runner.run(test_mode=False)
        runner.close_env()
        for key, value in episode.data.transition_data.items():
            assert th.equal(parallel_batch[key][i], value[0]), (key, i)


def test_filled_terminated_and_rewards_follow_the_episodes(parallel_batch):
    for i in range(N_PARALLEL):
        seed = BASE_SEED + i
        length = min(intended_length(seed), EPISODE_LIMIT)
        filled = parallel_batch["filled"][i, :, 0]  # [T]
        assert filled.tolist() == [1] * (length + 1) + [0] * (EPISODE_LIMIT - length)
        terminated = parallel_batch["terminated"][i, :, 0].tolist()  # [T]
        cut_by_limit = intended_length(seed) > EPISODE_LIMIT
        assert terminated[length - 1] == (0 if cut_by_limit else 1)
        assert sum(terminated) == (0 if cut_by_limit else 1)
        state_t = parallel_batch["state"][i, :length + 1, 0]  # [length + 1]
        assert state_t.tolist() == list(range(length + 1))
        assert (parallel_batch["state"][i, :length + 1, 1] == seed).all()
        actions = parallel_batch["actions"][i, :length, :, 0]  # [length, n_agents]
        expected_rewards = (10 * actions[:, 0] + actions[:, 1]).float()
        assert th.equal(parallel_batch["reward"][i, :length, 0], expected_rewards)


def test_actions_are_available_and_chosen_at_the_final_step(parallel_batch):
    for i in range(N_PARALLEL):
        length = min(intended_length(BASE_SEED + i), EPISODE_LIMIT)
        actions = parallel_batch["actions"][i, :length + 1]  # [length + 1, n_agents, 1]
        avail = parallel_batch["avail_actions"][i, :length + 1]  # [length + 1, n_agents, n_actions]
        assert (avail.gather(-1, actions) == 1).all()
        onehot = parallel_batch["actions_onehot"][i, :length + 1]  # [length + 1, n_agents, n_actions]
        assert th.equal(onehot.argmax(-1, keepdim=True), actions)


def test_training_stats_and_t_env():
    logger = RecordingLogger()
    runner = make_runner(make_args("parallel", BASE_SEED, N_PARALLEL), logger=logger)
    try:
        runner.run(test_mode=False)
        lengths = [min(intended_length(BASE_SEED + i), EPISODE_LIMIT) for i in range(N_PARALLEL)]
        assert runner.t_env == sum(lengths)
        assert set(logger.stats) == {"return_mean", "return_std", "ep_length_mean", "battle_won_mean",
                                     "episode_limit_mean", "epsilon"}
        assert logger.stats["ep_length_mean"] == [(runner.t_env, np.mean(lengths))]
        assert logger.stats["battle_won_mean"][0][1] == pytest.approx(3 / 4)
        assert logger.stats["episode_limit_mean"][0][1] == pytest.approx(1 / 4)
        assert logger.stats["epsilon"] == [(runner.t_env, 0.25)]

        runner.run(test_mode=True)  # test episodes do not count as env steps
        assert runner.t_env == sum(lengths)
        test_keys = {key for key in logger.stats if key.startswith("test_")}
        assert test_keys == {"test_return_mean", "test_return_std", "test_ep_length_mean",
                             "test_battle_won_mean", "test_episode_limit_mean"}
    finally:
        runner.close_env()


def test_test_stats_wait_for_test_nepisode_episodes():
    logger = RecordingLogger()
    args = make_args("episode", 0, 1)
    args.test_nepisode = 2
    runner = make_runner(args, logger=logger)
    runner.run(test_mode=True)
    assert "test_return_mean" not in logger.stats
    runner.run(test_mode=True)
    assert len(logger.stats["test_return_mean"]) == 1
    assert logger.stats["test_ep_length_mean"][0][1] == intended_length(0)


def test_each_worker_gets_its_own_seed(parallel_batch):
    seeds = parallel_batch["state"][:, 0, 1]  # [batch]
    assert seeds.tolist() == [BASE_SEED + i for i in range(N_PARALLEL)]


def test_worker_error_reaches_the_parent():
    runner = make_runner(make_args("parallel", 0, 2, fail_on_reset=True))
    try:
        with pytest.raises(RuntimeError, match="countdown env asked to fail"):
            runner.run()
    finally:
        runner.close_env()


def test_runners_work_with_the_real_controller():
    args = make_args("parallel", BASE_SEED, 2)
    runner = runner_REGISTRY["parallel"](args, RecordingLogger())
    try:
        env_info = runner.get_env_info()
        scheme, groups, preprocess = build_scheme(env_info)
        vars(args).update(n_agents=env_info["n_agents"], n_actions=env_info["n_actions"],
                          state_shape=env_info["state_shape"], obs_shape=env_info["obs_shape"],
                          agent="n_rnn", rnn_hidden_dim=8, obs_agent_id=True, obs_last_action=True,
                          action_selector="epsilon_greedy", epsilon_start=1.0, epsilon_finish=0.05,
                          epsilon_anneal_time=100, test_greedy=True)
        preprocessed_scheme = EpisodeBatch(scheme, groups, 1, 1, preprocess=preprocess).scheme  # + actions_onehot
        mac = mac_REGISTRY["n_mac"](preprocessed_scheme, groups, args)
        runner.setup(scheme, groups, preprocess, mac)
        for test_mode in (False, True):
            batch = runner.run(test_mode=test_mode)
            filled = batch["filled"]  # [batch, T, 1]
            chosen_avail = batch["avail_actions"].gather(-1, batch["actions"])  # [batch, T, n_agents, 1]
            assert (chosen_avail[filled[..., 0] == 1] == 1).all()
    finally:
        runner.close_env()


def test_episode_runner_rejects_several_envs():
    with pytest.raises(ValueError, match="batch_size_run=1 or runner=parallel"):
        runner_REGISTRY["episode"](make_args("episode", 0, 2), RecordingLogger())


def test_unknown_env_name():
    args = make_args("episode", 0, 1)
    args.env = "nope"
    with pytest.raises(ValueError, match="unknown env 'nope'; known envs: .*countdown"):
        runner_REGISTRY["episode"](args, RecordingLogger())
