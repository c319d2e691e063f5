"""Episode and parallel runners on a deterministic env (tests/countdown_env.py) and on the real envs,
with the envs in the main process and in worker processes."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch as th

from components.episode_buffer import EpisodeBatch
from components.transforms import OneHot
from controllers import REGISTRY as mac_REGISTRY
from countdown_env import EPISODE_LIMIT, N_ACTIONS, CountdownEnv, intended_length
from envs import REGISTRY as env_REGISTRY
from main import build_config
from main_runs import run_main
from run.run import build_scheme
from runners import REGISTRY as runner_REGISTRY
from runners import parallel_runner, runner_base
from runners.parallel_runner import EnvWorkers, uses_workers
from runners.runner_base import BatchArrays, InProcessEnvs, env_seeds
from test_sc2_engine import fake_install

th.set_num_threads(1)

BASE_SEED = 4  # env seeds 4..7: lengths 3, 4, 5 (ends exactly at the limit), 5 (cut by the limit)
N_PARALLEL = 4
MODES = ("main", "workers")


class RecordingLogger:
    """Logger stand-in: keeps every log_stat call."""

    def __init__(self):
        self.stats = {}
        self.console_logger = SimpleNamespace(warning=print, info=print)

    def log_stat(self, key, value, t, to_sacred=True):
        self.stats.setdefault(key, []).append((t, value))

    def log_episodes(self, values, t):
        for name, episode_values in values.items():
            self.stats.setdefault(f"episodes_{name}", []).append((t, list(episode_values)))


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


def make_args(runner: str, seed: int, batch_size_run: int, env_processes: str = "auto",
              **env_args) -> SimpleNamespace:
    return SimpleNamespace(runner=runner, env="countdown", env_args=dict(env_args, seed=seed),
                           batch_size_run=batch_size_run, test_nepisode=batch_size_run,
                           runner_log_interval=1000, device="cpu", env_processes=env_processes)


def config_args(env_config: str, env_processes: str, batch_size_run: int, **env_args) -> SimpleNamespace:
    """main.py's merged qmix config on envs/<env_config>.yaml, with a small agent network."""
    config = build_config(["main.py", "--config=qmix", f"--env-config={env_config}"])
    config.update(env_args=dict(config["env_args"], seed=BASE_SEED, **env_args), batch_size_run=batch_size_run,
                  env_processes=env_processes, device="cpu", rnn_hidden_dim=8)
    return SimpleNamespace(**config)


def make_runner(args, mac=None, logger=None, preprocess=None):
    """A runner set up with `mac` (HighestAvailableMAC by default) and build_scheme's fields;
    `preprocess` replaces build_scheme's preprocess when given."""
    runner = runner_REGISTRY[args.runner](args, logger or RecordingLogger())
    scheme, groups, scheme_preprocess = build_scheme(runner.get_env_info())
    runner.setup(scheme, groups, scheme_preprocess if preprocess is None else preprocess,
                 mac or HighestAvailableMAC())
    return runner


def set_up_real_mac(runner, args) -> None:
    """Give `runner` PyMARL2's n_mac (epsilon-greedy, annealed from 1) sized by its env."""
    env_info = runner.get_env_info()
    scheme, groups, preprocess = build_scheme(env_info)
    vars(args).update(n_agents=env_info["n_agents"], n_actions=env_info["n_actions"],
                      state_shape=env_info["state_shape"], obs_shape=env_info["obs_shape"])
    for key, value in {"agent": "n_rnn", "rnn_hidden_dim": 8, "obs_agent_id": True, "obs_last_action": True,
                       "action_selector": "epsilon_greedy", "epsilon_start": 1.0, "epsilon_finish": 0.05,
                       "epsilon_anneal_time": 100, "test_greedy": True}.items():
        vars(args).setdefault(key, value)
    mac_scheme = EpisodeBatch(scheme, groups, 1, 1, preprocess=preprocess).scheme  # with the preprocess outputs
    runner.setup(scheme, groups, preprocess, mac_REGISTRY["n_mac"](mac_scheme, groups, args))


@pytest.fixture(scope="module", params=MODES)
def parallel_batch(request):
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(env_REGISTRY, "countdown", CountdownEnv)
        runner = make_runner(make_args("parallel", BASE_SEED, N_PARALLEL, env_processes=request.param))
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
        actions = parallel_batch["actions"][i, :length + 1].long()  # [length + 1, n_agents, 1]
        avail = parallel_batch["avail_actions"][i, :length + 1]  # [length + 1, n_agents, n_actions]
        assert (avail.gather(-1, actions) == 1).all()
        assert (parallel_batch["actions"][i, length + 1:] == 0).all()


def test_actions_reach_their_preprocessed_field():
    preprocess = {"actions": ("actions_onehot", [OneHot(out_dim=N_ACTIONS)])}
    runner = make_runner(make_args("parallel", BASE_SEED, N_PARALLEL, env_processes="main"), preprocess=preprocess)
    batch = runner.run(test_mode=False)
    onehot = batch["actions_onehot"]  # [batch, T, n_agents, n_actions]
    filled = batch["filled"][:, :, 0].bool()  # [batch, T]
    assert th.equal(onehot.argmax(-1, keepdim=True)[filled], batch["actions"][filled].long())
    assert (onehot[~filled] == 0).all()


def test_a_preprocess_the_runner_would_skip_is_refused():
    """The runner writes the env fields straight into the batch: a preprocess of them would never run."""
    preprocess = {"actions": ("actions_onehot", [OneHot(out_dim=N_ACTIONS)]),
                  "terminated": ("terminated_onehot", [OneHot(out_dim=2)])}
    with pytest.raises(ValueError, match="the runner writes terminated straight into the batch"):
        make_runner(make_args("parallel", BASE_SEED, N_PARALLEL, env_processes="main"), preprocess=preprocess)


def test_a_host_copy_pushed_step_by_step_fills_the_same_batch(monkeypatch, parallel_batch):
    """Off the CPU (CUDA) the runner writes a host copy and pushes each step into the batch; forced here on the CPU."""
    monkeypatch.setattr(runner_base, "BatchArrays", lambda batch, shared: BatchArrays(batch, shared=False))
    runner = make_runner(make_args("parallel", BASE_SEED, N_PARALLEL, env_processes="main"))
    batch = runner.run(test_mode=False)
    for key, value in parallel_batch.data.transition_data.items():
        assert th.equal(batch[key], value), key


@pytest.mark.parametrize("env_config, env_args", [
    ("null", {"map_name": "corridor", "episode_length": 12}),
    ("small_stag_hunt", {}),
    ("sc2", {"map_name": "3m", "backend": "builtin"}),
])
def test_main_process_and_worker_runs_are_identical(env_config, env_args):
    """Same seeds, same controller: the same batches, stats, t_env and env stats in both modes."""
    outcomes = {}
    for mode in MODES:
        args = config_args(env_config, mode, 3, **env_args)
        logger = RecordingLogger()
        runner = runner_REGISTRY["parallel"](args, logger)
        try:
            assert isinstance(runner.envs, InProcessEnvs if mode == "main" else EnvWorkers)
            th.manual_seed(0)
            set_up_real_mac(runner, args)
            batches = [runner.run(test_mode=test_mode) for test_mode in (False, False, True)]
            outcomes[mode] = (batches, logger.stats, runner.t_env, runner.get_env_stats())
        finally:
            runner.close_env()
    (main_batches, *main_rest), (worker_batches, *worker_rest) = outcomes["main"], outcomes["workers"]
    assert main_rest == worker_rest
    for main_batch, worker_batch in zip(main_batches, worker_batches):
        assert main_batch.data.transition_data.keys() == worker_batch.data.transition_data.keys()
        for key, value in main_batch.data.transition_data.items():
            assert th.equal(value, worker_batch[key]), key
    t_env = main_rest[1]
    assert t_env == sum(int(batch["filled"].sum()) - batch.batch_size for batch in main_batches[:2])


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
    # The round's two episodes are kept one by one, their mean the logged one.
    (t, returns), = logger.stats["episodes_return"]
    assert len(returns) == 2 and sum(returns) / 2 == pytest.approx(logger.stats["test_return_mean"][0][1])


def test_each_env_gets_its_own_seed(parallel_batch):
    seeds = parallel_batch["state"][:, 0, 1]  # [batch]
    assert seeds.tolist() == [BASE_SEED + i for i in range(N_PARALLEL)]


@pytest.mark.parametrize("mode", MODES)
def test_a_resumed_run_builds_its_envs_with_the_next_seed_generation(mode):
    args = make_args("parallel", BASE_SEED, N_PARALLEL, env_processes=mode)
    args.env_seed_generation = 2
    runner = make_runner(args)
    try:
        assert runner.env_seeds == env_seeds(BASE_SEED, N_PARALLEL, 2) == [12, 13, 14, 15]
        batch = runner.run(test_mode=False)
        assert batch["state"][:, 0, 1].tolist() == [12, 13, 14, 15]
        assert runner.state_dict()["seed_generation"] == 2
        assert runner.get_env_stats() == [{"episodes": 1}] * N_PARALLEL
    finally:
        runner.close_env()


class ThreadRecordingMAC(HighestAvailableMAC):
    def __init__(self):
        super().__init__()
        self.threads = set()

    def select_actions(self, ep_batch, t_ep, t_env, bs=slice(None), test_mode=False):
        self.threads.add(th.get_num_threads())
        return super().select_actions(ep_batch, t_ep, t_env, bs, test_mode)


def test_acting_uses_one_torch_thread_and_restores_the_count():
    mac = ThreadRecordingMAC()
    runner = make_runner(make_args("parallel", BASE_SEED, N_PARALLEL, env_processes="main"), mac=mac)
    previous = th.get_num_threads()
    th.set_num_threads(2)
    try:
        runner.run(test_mode=False)
        assert mac.threads == {1}
        assert th.get_num_threads() == 2
    finally:
        th.set_num_threads(previous)


BUILTIN_3M = {"map_name": "3m", "backend": "builtin"}


@pytest.mark.parametrize("env, env_args, cores, save_replay, workers", [
    ("null", {}, 16, False, False),
    ("stag_hunt", {}, 16, False, False),
    ("small_stag_hunt", {}, 16, False, False),
    ("one_step_matrix_game", {}, 16, False, False),
    ("sc2", BUILTIN_3M, 2, False, False),
    ("sc2", BUILTIN_3M, 4, False, True),  # the workers step the envs side by side
    ("gymma", {"key": "lbforaging:Foraging-8x8-2p-3f-v3"}, 16, False, False),
    ("gymma", {"key": "pz-mpe-simple-spread-v3"}, 2, False, False),
    ("gymma", {"key": "vmas-balance"}, 2, False, True),  # VMAS: one random state for all its envs of a process
    ("gymma", {"key": "pz-sisl-multiwalker-v9"}, 2, False, True),  # not measured: workers
    ("countdown", {}, 2, False, True),  # an env the runner knows nothing about
    ("sc2", BUILTIN_3M, 2, True, True),  # one replay file per process
])
def test_auto_env_processes(monkeypatch, env, env_args, cores, save_replay, workers):
    monkeypatch.setattr(parallel_runner, "usable_cores", lambda: cores)
    args = SimpleNamespace(env=env, env_args=env_args, batch_size_run=8, env_processes="auto", save_replay=save_replay)
    assert uses_workers(args) == workers


def test_auto_env_processes_keeps_starcraft_ii_in_workers(tmp_path, monkeypatch):
    monkeypatch.setenv("SC2PATH", str(fake_install(tmp_path)))
    args = SimpleNamespace(env="sc2", env_args={"map_name": "3m", "backend": "auto"}, batch_size_run=8,
                           env_processes="auto")
    assert uses_workers(args)


def test_explicit_env_processes_wins():
    args = SimpleNamespace(env="countdown", env_args={}, batch_size_run=8, env_processes="main")
    assert not uses_workers(args)
    args = SimpleNamespace(env="null", env_args={}, batch_size_run=8, env_processes="workers")
    assert uses_workers(args)


@pytest.mark.parametrize("mode, save_replay, message", [
    ("threads", False, "env_processes='threads' is not one of auto, main, workers: main steps the envs in the "
                       "training process, workers in one process per env, auto picks by env"),
    ("main", True, "save_replay=True with env_processes=main and batch_size_run > 1: "),
])
def test_impossible_env_processes_are_rejected(mode, save_replay, message):
    args = SimpleNamespace(env="null", env_args={}, batch_size_run=2, env_processes=mode, save_replay=save_replay)
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        uses_workers(args)


def test_bad_env_processes_gives_one_line(tmp_path):
    proc = run_main("--config=qmix", "--env-config=one_step_matrix_game", "with", f"local_results_path={tmp_path}",
                    "env_processes=thread", "use_cuda=False", "rnn_hidden_dim=8", "buffer_size=8", "batch_size=4")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("main.py: error: env_processes='thread' is not one of ")


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
        set_up_real_mac(runner, args)
        for test_mode in (False, True):
            batch = runner.run(test_mode=test_mode)
            filled = batch["filled"]  # [batch, T, 1]
            chosen_avail = batch["avail_actions"].gather(-1, batch["actions"].long())  # [batch, T, n_agents, 1]
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


@pytest.mark.parametrize("flag_timeouts", [True, False], ids=["flagged", "smac-default"])
def test_a_time_out_is_terminal_unless_the_env_flags_it(flag_timeouts):
    """SMAC with continuing_episode=False (its default) flags no time-out: the episode cut by the limit is
    stored terminal, as in PyMARL2; flagged with info["episode_limit"], it is not and the learner bootstraps."""
    seed = 7  # meant to last 6 steps: cut by the limit of 5
    runner = make_runner(make_args("episode", seed, 1, flag_timeouts=flag_timeouts))
    try:
        batch = runner.run(test_mode=False)
    finally:
        runner.close_env()
    terminated = batch["terminated"][0, :, 0].tolist()  # [T]
    assert intended_length(seed) > EPISODE_LIMIT and len(terminated) == EPISODE_LIMIT + 1
    assert terminated[EPISODE_LIMIT - 1] == (not flag_timeouts)


@pytest.mark.parametrize("env, env_args, compiles", [
    ("sc2", BUILTIN_3M, True),
    ("countdown", {"seed": 0}, False),
])
def test_env_workers_of_the_built_in_simulator_start_after_its_loops_are_compiled(monkeypatch, env, env_args,
                                                                                 compiles):
    # On a fresh install each worker would otherwise compile the loops itself, all at once: slower
    # than the runner waits for a worker's first answer (a restart, seen on a fresh clone).
    events = []
    monkeypatch.setattr(parallel_runner, "compile_builtin_loops", lambda: events.append("compile"))
    monkeypatch.setattr(EnvWorkers, "_start_worker", lambda self, i: events.append(f"start {i}"))
    args = SimpleNamespace(env=env, env_args=env_args, batch_size_run=2, env_processes="workers")
    EnvWorkers(args, RecordingLogger(), 0)
    assert events == (["compile"] if compiles else []) + ["start 0", "start 1"]
