"""Faults: env workers that die or hang, envs that return NaN, interrupts and parent death leave no
process behind."""
import contextlib
import glob
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
import torch as th

from countdown_env import EPISODE_LIMIT, CountdownEnv, intended_length
from envs import REGISTRY as env_REGISTRY
from fault_envs import FaultyCountdownEnv
from main_runs import REPO, read_json, run_dir, start_main, wait_until_training
from runners.parallel_runner import EnvWorkerError
from runners.runner_base import NonFiniteEnvOutput
from test_runners import HighestAvailableMAC, RecordingLogger, make_args, make_runner

th.set_num_threads(1)

BASE_SEED = 4
N_PARALLEL = 2


@pytest.fixture(autouse=True)
def envs_registered(monkeypatch):
    monkeypatch.setitem(env_REGISTRY, "countdown", CountdownEnv)
    monkeypatch.setitem(env_REGISTRY, "faulty", FaultyCountdownEnv)


def faulty_args(timeout_s: float = 60, max_failures: int = 3, **env_args):
    args = make_args("parallel", BASE_SEED, N_PARALLEL, env_processes="workers", **env_args)
    args.env = "faulty" if env_args else "countdown"
    args.env_worker_timeout = timeout_s
    args.env_worker_max_failures = max_failures
    return args


class KillingMAC(HighestAvailableMAC):
    """Kills worker `victim` with SIGKILL when asked for the actions of episode step `at_step` the first time."""

    def __init__(self, victim: int, at_step: int):
        super().__init__()
        self.victim, self.at_step = victim, at_step
        self.runner = None
        self.killed_pid = None

    def select_actions(self, ep_batch, t_ep, t_env, bs=slice(None), test_mode=False):
        if t_ep == self.at_step and self.killed_pid is None:
            self.killed_pid = self.runner.envs.workers[self.victim].pid
            os.kill(self.killed_pid, signal.SIGKILL)
        return super().select_actions(ep_batch, t_ep, t_env, bs, test_mode)


def assert_full_batch(batch, seeds):
    """Every env played one whole episode (the batch was not cut by the restart)."""
    for i, seed in enumerate(seeds):
        length = min(intended_length(seed), EPISODE_LIMIT)
        assert batch["filled"][i, :, 0].sum().item() == length + 1
        assert batch["state"][i, 0, 1].item() == seed  # the env row came from this seed


def test_killed_worker_is_restarted_and_the_batch_replayed():
    mac = KillingMAC(victim=1, at_step=2)
    logger = RecordingLogger()
    runner = make_runner(faulty_args(), mac=mac, logger=logger)
    mac.runner = runner
    try:
        batch = runner.run(test_mode=False)
        new_seed = BASE_SEED + 1 + N_PARALLEL  # worker 1, seed generation 1
        assert runner.env_seeds == [BASE_SEED, new_seed]
        assert_full_batch(batch, runner.env_seeds)
        assert not psutil.pid_exists(mac.killed_pid) or psutil.Process(mac.killed_pid).status() == "zombie"
        assert runner.envs.workers[1].pid != mac.killed_pid and runner.envs.workers[1].is_alive()
        assert runner.envs.restarts == 1
        assert logger.stats["env_worker_restarts"] == [(0, 1)]
        # Only the finished batch counts: t_env holds its episodes, not the dropped ones.
        assert runner.t_env == sum(min(intended_length(s), EPISODE_LIMIT) for s in runner.env_seeds)
        runner.run(test_mode=False)  # the restarted worker keeps serving
        assert runner.envs.restarts == 1
    finally:
        runner.close_env()


def test_hanging_worker_is_killed_after_the_timeout():
    runner = make_runner(faulty_args(timeout_s=2, fault="hang", fault_step=2, fault_seeds=[BASE_SEED + 1]))
    hung_pid = runner.envs.workers[1].pid
    try:
        start = time.monotonic()
        batch = runner.run(test_mode=False)
        elapsed = time.monotonic() - start
        assert 2 <= elapsed < 20
        assert runner.envs.restarts == 1
        assert runner.env_seeds[1] == BASE_SEED + 1 + N_PARALLEL
        assert_full_batch(batch, runner.env_seeds)
        assert not psutil.pid_exists(hung_pid) or psutil.Process(hung_pid).status() == "zombie"
    finally:
        runner.close_env()


def test_workers_that_keep_failing_stop_the_run():
    args = faulty_args(max_failures=2, fault="exit", fault_step=1)
    args.batch_size_run = 1
    runner = make_runner(args)
    try:
        with pytest.raises(EnvWorkerError, match=r"env worker 0 exited unexpectedly \(exit code 3\); 2 env worker "
                                                 r"failures in a row \(env_worker_max_failures=2\): stopping"):
            runner.run(test_mode=False)
        assert runner.envs.restarts == 1
    finally:
        runner.close_env()
    assert runner.envs.workers == []


@pytest.mark.parametrize("runner_name, env_processes, fault, message", [
    ("parallel", "workers", "nan_reward", r"\(env 1, seed 5\) returned nan in its reward at episode step 2"),
    ("parallel", "main", "nan_reward", r"\(env 1, seed 5\) returned nan in its reward at episode step 2"),
    ("parallel", "main", "inf_obs", r"\(env 1, seed 5\) returned inf in its obs at episode step 2"),
    ("episode", "main", "inf_obs", r"\(env 0, seed 4\) returned inf in its obs at episode step 2"),
])
def test_non_finite_env_output_is_named(runner_name, env_processes, fault, message):
    n_envs = N_PARALLEL if runner_name == "parallel" else 1
    args = make_args(runner_name, BASE_SEED, n_envs, env_processes=env_processes, fault=fault, fault_step=2,
                     fault_seeds=[BASE_SEED + n_envs - 1])
    args.env = "faulty"
    runner = make_runner(args)
    try:
        with pytest.raises(NonFiniteEnvOutput, match="env 'faulty' " + message):
            runner.run(test_mode=False)
    finally:
        runner.close_env()


ORPHAN_SCRIPT = """
import sys, time
sys.path[:0] = [{src!r}, {tests!r}]
from types import SimpleNamespace
from countdown_env import CountdownEnv
from envs import REGISTRY
REGISTRY["countdown"] = CountdownEnv
from runners.parallel_runner import ParallelRunner
args = SimpleNamespace(env="countdown", env_args={{"seed": 0}}, batch_size_run=2, test_nepisode=2,
                       runner_log_interval=1000, device="cpu")
runner = ParallelRunner(args, None)
print(" ".join(str(w.pid) for w in runner.envs.workers), flush=True)
time.sleep(600)
"""


def wait_gone(pids: list, timeout_s: float) -> list:
    """The pids still running (not zombies) after waiting up to timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def run_children(pid: int) -> list:
    """The pids of the processes that a run of main.py started, except GitPython's `git` processes: sacred
    reads the repository's state with them at the start, and they end when the garbage collector gets to
    the objects that hold them, which may be well into training."""
    children = []
    for child in psutil.Process(pid).children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            if child.name() != "git":
                children.append(child.pid)
    return children


def test_workers_exit_when_the_parent_is_killed():
    script = ORPHAN_SCRIPT.format(src=os.path.join(REPO, "src"), tests=os.path.dirname(__file__))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(pid) for pid in proc.stdout.readline().split()]
        assert len(pids) == 2 and wait_gone(pids, 0) == pids
        proc.kill()
        proc.wait(timeout=10)
        assert wait_gone(pids, 10) == []
    finally:
        proc.kill()


# Both signals go through one handler (utils/stop.py): the default set has each signal once, the other two
# combinations are in the slow set.
@pytest.mark.parametrize("sig, env_processes, times", [
    (signal.SIGINT, "workers", 1), pytest.param(signal.SIGTERM, "workers", 1, marks=pytest.mark.slow),
    pytest.param(signal.SIGINT, "main", 1, marks=pytest.mark.slow), (signal.SIGTERM, "main", 3)])
def test_signal_stops_training_saves_and_leaves_no_process(tmp_path, sig, env_processes, times):
    """A long run is stopped by a signal within seconds: final checkpoint, INTERRUPTED, no child left; the
    same when the signal comes again (`timeout` and a signal to its process group send two). The run with
    its envs in the main process is a new interpreter (a real start-up and shutdown), the others go
    through the tests' run server."""
    log_path = tmp_path / "stderr.txt"
    proc = start_main("--config=qmix", "--env-config=one_step_matrix_game", "with", f"local_results_path={tmp_path}",
                      "batch_size_run=2", f"env_processes={env_processes}", "t_max=10000000", "test_interval=100000",
                      "log_interval=100000", "save_model=True", "save_model_interval=100000000", "use_cuda=False",
                      "rnn_hidden_dim=8", "mixing_embed_dim=8", "hypernet_embed=8", "buffer_size=8", "batch_size=4",
                      output=log_path, fresh=env_processes == "main")
    try:
        deadline = time.monotonic() + 60
        while "Beginning training" not in log_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)
        children = run_children(proc.pid)
        if env_processes == "workers":
            assert len(children) >= 2  # the forkserver and the two env workers
        else:
            assert children == []  # the envs run in the training process
        start = time.monotonic()
        for _ in range(times):
            proc.send_signal(sig)
            time.sleep(0.05)
        assert proc.wait(timeout=30) == 128 + sig
        assert time.monotonic() - start < 15
    finally:
        proc.kill()
    output = log_path.read_text()
    assert output.strip().splitlines()[-1] == f"main.py: interrupted by {sig.name}"
    assert wait_gone(children, 5) == []
    (token,) = os.listdir(tmp_path / "models")
    steps = sorted(int(step) for step in os.listdir(tmp_path / "models" / token))
    assert len(steps) == 2 and steps[0] == 2  # the first save, and the final one at the stop
    assert (tmp_path / "models" / token / str(steps[1]) / "training_state.pt").exists()
    folder = run_dir(str(tmp_path), "one_step_matrix_game", "qmix_env=8_adam_td_lambda", 1)
    assert read_json(folder, "run.json")["status"] == "INTERRUPTED"
    assert f"{sig.name} received: stopping at t_env {steps[1]}" in output
    with open(os.path.join(folder, "cout.txt")) as cout:  # the record's log too, to its last line
        assert f"{sig.name} received: stopping at t_env {steps[1]}" in cout.read()


# --- stop signals to the process group, a killed forkserver, a killed main process with a hung worker ----------

def start_training(tmp_path, *extra: str) -> tuple:
    """main.py on 3m in a process group of its own (so the test can signal the whole group), with 4 env
    workers (collecting takes most of its time, as in a real run); returns (process, log path) once
    training has begun."""
    log_path = tmp_path / "stderr.txt"
    proc = start_main("--config=qmix", "--env-config=sc2", "with", "env_args.map_name=3m",
                      f"local_results_path={tmp_path}", "batch_size_run=4", "env_processes=workers", "test_interval=100000", "log_interval=100000",
                      "save_model=True", "save_model_interval=100000000", "use_cuda=False", "rnn_hidden_dim=8",
                      "mixing_embed_dim=8", "hypernet_embed=8", "buffer_size=16", "batch_size=4", *extra,
                      output=log_path)
    wait_until_training(proc, log_path, runs=1, timeout_s=60)
    return proc, log_path


def forkserver_of(pid: int) -> psutil.Process:
    return next(child for child in psutil.Process(pid).children() if "forkserver" in " ".join(child.cmdline()))


@pytest.mark.parametrize("sig", [pytest.param(signal.SIGTERM, marks=pytest.mark.slow), signal.SIGINT])  # (one handler)
def test_a_stop_signal_to_the_process_group_saves_and_stops_cleanly(tmp_path, sig):
    """What systemd, Slurm's scancel or Ctrl-C in a terminal do: every process of the group gets the signal."""
    proc, log_path = start_training(tmp_path, "t_max=10000000")
    # The stop is to come during training: after the first iteration's checkpoint (the workers' first
    # episodes can take seconds: each loads the simulator's compiled loops, or compiles them in a new clone).
    try:
        deadline = time.monotonic() + 90
        while not glob.glob(str(tmp_path / "models" / "*" / "[0-9]*")) and time.monotonic() < deadline:
            time.sleep(0.2)
        descendants = run_children(proc.pid)
        assert len(descendants) >= 5  # the forkserver and 4 workers (and the resource tracker)
        start = time.monotonic()
        os.killpg(proc.pid, sig)
        assert proc.wait(timeout=60) == 128 + sig
        assert time.monotonic() - start < 20  # the run, and whatever it left in its group, within seconds
    finally:
        proc.kill()
    output = log_path.read_text()
    assert "restarted" not in output and "failures in a row" not in output  # the workers outlived the signal
    assert output.strip().splitlines()[-1] == f"main.py: interrupted by {sig.name}"
    assert wait_gone(descendants, 5) == []
    (token,) = os.listdir(tmp_path / "models")
    final = max(int(step) for step in os.listdir(tmp_path / "models" / token))
    assert f"{sig.name} received: stopping at t_env {final}" in output  # the final checkpoint is of the stop
    assert (tmp_path / "models" / token / str(final) / "checksums.json").exists()
    folder = run_dir(str(tmp_path), "3m", "qmix_env=8_adam_td_lambda", 1)
    assert read_json(folder, "run.json")["status"] == "INTERRUPTED"


def test_losing_the_forkserver_costs_one_restart_of_all_workers(tmp_path):
    """The OOM killer may pick the forkserver: its workers die with it; that is one failure, not four."""
    proc, log_path = start_training(tmp_path, "t_max=3000", "env_worker_max_failures=2")
    try:
        forkserver_of(proc.pid).kill()
        assert proc.wait(timeout=120) == 0
    finally:
        proc.kill()
    output = log_path.read_text()
    assert output.count("restarted it with seed") == 4 and "failures in a row" not in output
    folder = run_dir(str(tmp_path), "3m", "qmix_env=8_adam_td_lambda", 1)
    assert read_json(folder, "run.json")["status"] == "COMPLETED"
    assert read_json(folder, "info.json")["env_worker_restarts"][-1] == 4


HUNG_WORKER_SCRIPT = """
import sys, time
sys.path[:0] = [{src!r}, {tests!r}]
from types import SimpleNamespace
from envs import REGISTRY
from fault_envs import FaultyCountdownEnv
REGISTRY["faulty"] = FaultyCountdownEnv
from runners.parallel_runner import EnvWorkers
args = SimpleNamespace(env="faulty", env_args={{"seed": 0, "fault": "hang", "fault_step": 1}}, batch_size_run=2,
                       env_processes="workers", env_worker_timeout=600)
workers = EnvWorkers(args, None, 0)
avail = workers.reset()[0].avail_actions
workers._send(0, "step", [next(a for a, ok in enumerate(agent) if ok) for agent in avail])  # worker 0 hangs in step
print(" ".join(str(w.pid) for w in workers.workers), flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("how", ["hangs", "stopped"])
def test_a_killed_main_process_leaves_no_process_even_with_a_hung_worker(how):
    script = HUNG_WORKER_SCRIPT.format(src=os.path.join(REPO, "src"), tests=os.path.dirname(__file__))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(pid) for pid in proc.stdout.readline().split()]
        time.sleep(0.5)
        if how == "stopped":
            os.kill(pids[1], signal.SIGSTOP)
        descendants = [child.pid for child in psutil.Process(proc.pid).children(recursive=True)]
        assert set(pids) <= set(descendants) and wait_gone(descendants, 0) == descendants
        proc.kill()
        proc.wait(timeout=10)
        assert wait_gone(descendants, 10) == []  # workers, forkserver and resource tracker
    finally:
        proc.kill()


def test_a_stop_signal_gives_up_on_a_hung_worker_within_seconds(capsys, monkeypatch):
    import threading
    from runners import parallel_runner
    from utils.stop import StoppedWaiting, StopSignals
    # 1 s instead of 5 for the grace and for closing the hung worker: the same path with less waiting
    monkeypatch.setattr(parallel_runner, "STOP_GRACE_S", 1.0)
    monkeypatch.setattr(parallel_runner, "_CLOSE_TIMEOUT_S", 1.0)
    runner = make_runner(faulty_args(timeout_s=600, fault="hang", fault_step=2, fault_seeds=[BASE_SEED + 1]))
    try:
        with StopSignals():
            threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
            start = time.monotonic()
            with pytest.raises(StoppedWaiting, match="env worker 1 did not answer within 1 s of SIGINT"):
                runner.run(test_mode=False)
            assert time.monotonic() - start < 10  # the 1 s timer, the 1 s grace and the steps before
    finally:
        runner.close_env()
    assert "SIGINT: waiting at most 1 s for env worker 1 (seed 5) to answer" in capsys.readouterr().out
