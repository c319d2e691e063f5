"""No StarCraft II game outlives its run: every path that ends a run (an env error in a worker, a
failed launch, a killed main process, Ctrl-C) is played with a stand-in game process started the
way the engine starts the real game (tests/sc2_fakes.py StandInGame), and afterwards no process the
run started is alive. Also: the parallel runner's start-up allowance lasts until the first reset."""
import os
import signal
import subprocess
import sys

import psutil
import pytest
import torch as th

from envs import REGISTRY as env_REGISTRY
from envs.starcraft.sc2client.sc2_engine import SC2Engine, launch_sc2, start_game_process
from fault_envs import CloseFailsEnv, SlowResetEnv, StandInGameEnv
from main_runs import REPO
from pysc2.lib import remote_controller, sc_process
from runners import parallel_runner
from sc2_fakes import StandInGame, end_stand_in_games, signals_received, stand_in_game_binary, stand_in_games
from test_faults import wait_gone
from test_runners import make_args, make_runner

th.set_num_threads(1)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="death signals are Linux's")


@pytest.fixture(autouse=True)
def envs_registered(monkeypatch):
    monkeypatch.setitem(env_REGISTRY, "stand_in_game", StandInGameEnv)
    monkeypatch.setitem(env_REGISTRY, "slow_reset", SlowResetEnv)


@pytest.fixture(autouse=True)
def no_game_left_behind(tmp_path):
    """A failing test must not leave its stand-in games running."""
    yield
    end_stand_in_games(tmp_path)


def game_pids(record_dir) -> list[int]:
    return sorted(stand_in_games(record_dir))


# ---- how a game is started ---------------------------------------------------------------------
def test_a_game_runs_in_a_session_of_its_own_and_dies_with_its_starter(tmp_path):
    launcher = StandInGame(tmp_path)
    game = launcher()
    ((pid, records),) = stand_in_games(tmp_path).items()
    start = records[0]
    assert start["ppid"] == os.getpid()
    assert start["sid"] == pid and start["pgid"] == pid  # not in the run's session or process group
    assert start["death_signal"] == signal.SIGKILL
    game.close()
    assert wait_gone([pid], 0) == []
    assert signals_received(stand_in_games(tmp_path)[pid]) == ["SIGTERM"]  # pysc2's way of closing


def test_a_game_started_off_the_main_thread_gets_no_death_signal(tmp_path):
    """The kernel sends the death signal when the starting *thread* ends: a game started on a short-lived
    thread would be killed with it, so it is not armed there."""
    import threading
    env = dict(os.environ, STAND_IN_GAME_DIR=str(tmp_path), STAND_IN_GAME_HANDSHAKE="1")
    from sc2_fakes import STAND_IN_GAME
    procs = []

    def start():
        procs.append(start_game_process([sys.executable, "-I", "-c", STAND_IN_GAME], env=env,
                                        stdout=subprocess.PIPE))
        procs[0].stdout.readline()

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    try:
        ((pid, records),) = stand_in_games(tmp_path).items()
        assert records[0]["death_signal"] == 0 and records[0]["sid"] == pid
        assert wait_gone([pid], 0) == [pid]  # outlived its thread
    finally:
        sc_process._shutdown_proc(procs[0], 3)
        procs[0].stdout.close()


def test_launch_sc2_starts_the_game_with_start_game_process(tmp_path, monkeypatch):
    """pysc2 launches <SC2PATH>/Versions/Base*/SC2_x64 (here the stand-in, which exits after 0.5 s so
    that pysc2 gives up connecting at once): through start_game_process, and only within the launch."""
    install = tmp_path / "StarCraftII"
    stand_in_game_binary(install / "Versions" / "Base75689" / "SC2_x64")
    records = tmp_path / "records"
    records.mkdir()
    monkeypatch.setenv("SC2PATH", str(install))
    monkeypatch.setenv("STAND_IN_GAME_DIR", str(records))
    monkeypatch.setenv("STAND_IN_GAME_LIFETIME", "0.5")
    monkeypatch.setattr("platform.system", lambda: "Linux")
    with pytest.raises(remote_controller.ConnectError):
        launch_sc2(None, (640, 480))
    ((pid, game_records),) = stand_in_games(records).items()
    start = game_records[0]
    assert start["argv"][:2] == ["-listen", "127.0.0.1"]  # pysc2's command line
    assert start["sid"] == pid and start["death_signal"] == signal.SIGKILL
    assert wait_gone([pid], 5) == []
    assert sc_process.subprocess is subprocess  # the patch was scoped to the launch


# ---- a launch that fails half-way ----------------------------------------------------------------
@pytest.mark.parametrize("fail_on", ["create_game", "join_game", "game_info"])
def test_a_launch_failing_after_the_game_started_ends_the_game(tmp_path, fail_on):
    launcher = StandInGame(tmp_path, fail_on=fail_on)
    with pytest.raises(Exception, match=f"fake game crashed in {fail_on}"):
        SC2Engine("3m", 1, launcher=launcher)
    (pid,) = game_pids(tmp_path)
    assert wait_gone([pid], 0) == []  # ended before the error reached the caller


# ---- an env that raises inside a parallel worker ----------------------------------------------------
@pytest.mark.parametrize("fault, message", [("reset", "stand-in env failed in reset"),
                                            ("launch", "fake game crashed in join_game")])
def test_an_env_error_in_a_worker_leaves_no_game(tmp_path, fault, message):
    args = make_args("parallel", 0, 2, env_processes="workers", record_dir=str(tmp_path), fault=fault)
    args.env = "stand_in_game"
    runner = make_runner(args)
    try:
        with pytest.raises(RuntimeError, match=f"(?s)env worker 0 .*{message}"):
            runner.run(test_mode=True)
        games = stand_in_games(tmp_path)
        pids = sorted(games)
        (failed,) = [pid for pid, records in games.items() if records[0]["ppid"] == runner.envs.workers[0].pid]
        # The failing worker closed its env before it sent the error: its game is gone already.
        assert wait_gone([failed], 0) == [] and signals_received(games[failed]) == ["SIGTERM"]
    finally:
        runner.close_env()
    assert wait_gone(pids, 5) == []


def test_an_env_whose_close_fails_too_reports_both_tracebacks(monkeypatch):
    monkeypatch.setitem(env_REGISTRY, "close_fails", CloseFailsEnv)
    args = make_args("parallel", 0, 2, env_processes="workers", fail_on_reset=True)
    args.env = "close_fails"
    runner = make_runner(args)
    try:
        with pytest.raises(RuntimeError, match="(?s)countdown env asked to fail.*Closing the env after that failed "
                                               "too:.*closing the countdown env failed"):
            runner.run(test_mode=True)
    finally:
        runner.close_env()


# ---- a killed main process, Ctrl-C -------------------------------------------------------------------
RUN_SCRIPT = """
import os, signal, sys, time
# As started from a terminal: Ctrl-C raises KeyboardInterrupt. (A process inherits an ignored
# SIGINT, and Python then leaves it ignored: seen in the full suite, where a pytest worker had it.)
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path[:0] = [{src!r}, {tests!r}]
from types import SimpleNamespace
from envs import REGISTRY
from fault_envs import StandInGameEnv
from utils.stop import StopSignals
REGISTRY["stand_in_game"] = StandInGameEnv
mode, stop, record_dir = {mode!r}, {stop!r}, {record_dir!r}
signals = StopSignals() if stop == "stop_signals" else None
if signals is not None:
    signals.__enter__()
if mode.startswith("workers"):
    from runners.parallel_runner import EnvWorkers
    hung = mode == "workers_hung"  # the envs hang in reset once their games run
    args = SimpleNamespace(env="stand_in_game", env_args={{"seed": 0, "record_dir": record_dir,
                           "fault": "hang" if hung else ""}}, batch_size_run=2, env_processes="workers",
                           env_worker_timeout=60)
    envs = EnvWorkers(args, None, 0)
    if hung:
        envs._send(0, "reset")
        envs._send(1, "reset")
        while len([f for f in os.listdir(record_dir) if f.startswith("game_")]) < 2:
            time.sleep(0.05)
    else:
        envs.reset()
else:
    envs = StandInGameEnv(seed=0, record_dir={record_dir!r})
    envs.reset()
print("ready", flush=True)
while signals is None or signals.received is None:  # without StopSignals, Ctrl-C raises KeyboardInterrupt
    time.sleep(0.05)
envs.close()  # what a run does once it has saved
print("closed", flush=True)
"""


def start_run(tmp_path, mode: str, stop: str = "none") -> subprocess.Popen:
    """The script above in a session of its own (so that a test can signal its process group), once its
    games run."""
    script = RUN_SCRIPT.format(src=os.path.join(REPO, "src"), tests=os.path.dirname(__file__), mode=mode,
                               stop=stop, record_dir=str(tmp_path))
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


@pytest.mark.parametrize("mode", ["workers", "workers_hung", "main"])
def test_a_killed_main_process_takes_its_games_with_it(tmp_path, mode):
    """Idle workers close their envs when their parent's end of the Pipe closes; workers busy in their
    env (hung) die by their death signal, and their games by theirs; in-process games by theirs."""
    proc = start_run(tmp_path, mode)
    try:
        pids = game_pids(tmp_path)
        assert len(pids) == (1 if mode == "main" else 2)
        descendants = [child.pid for child in psutil.Process(proc.pid).children(recursive=True)]
        assert set(pids) <= set(descendants) and wait_gone(descendants, 0) == descendants
        proc.kill()
        proc.wait(timeout=10)
        assert wait_gone(descendants, 10) == []  # games, workers, forkserver, resource tracker
    finally:
        proc.kill()
        proc.stdout.close()


@pytest.mark.parametrize("mode, stop", [("workers", "stop_signals"), ("main", "stop_signals"), ("main", "none")])
def test_ctrl_c_to_the_process_group_does_not_reach_the_game_and_the_run_ends_it(tmp_path, mode, stop):
    """Ctrl-C in a terminal signals the whole foreground process group. The game is not in it: it stays
    up until the run has stopped (with marlkit's StopSignals, or Python's KeyboardInterrupt and then
    the engine's exit hook) and closes it."""
    proc = start_run(tmp_path, mode, stop)
    try:
        pids = game_pids(tmp_path)
        descendants = [child.pid for child in psutil.Process(proc.pid).children(recursive=True)]
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    if stop == "stop_signals":
        assert proc.returncode == 0 and out.strip() == "closed"
    else:
        assert proc.returncode != 0  # KeyboardInterrupt
    for pid, records in stand_in_games(tmp_path).items():
        assert signals_received(records) == ["SIGTERM"], records  # closed by the engine, never SIGINTed
    assert wait_gone(pids + descendants, 5) == []


# ---- the start-up allowance ----------------------------------------------------------------------------
def slow_reset_runner(monkeypatch, slow_resets: tuple):
    monkeypatch.setattr(parallel_runner, "_START_TIMEOUT_S", 60.0)
    args = make_args("parallel", 0, 2, env_processes="workers", delay_s=4.0, slow_resets=slow_resets)
    args.env = "slow_reset"
    args.env_worker_timeout = 1.5
    return make_runner(args)


def test_the_start_up_allowance_covers_the_first_reset(monkeypatch):
    """The game launches at the first reset, after the env info was answered: that reset may take the
    start-up allowance, not only env_worker_timeout."""
    runner = slow_reset_runner(monkeypatch, slow_resets=(1,))
    try:
        runner.run(test_mode=True)
        assert runner.envs.restarts == 0 and runner.envs.starting == set()
    finally:
        runner.close_env()


def test_the_start_up_allowance_ends_with_the_first_reset(monkeypatch, capsys):
    runner = slow_reset_runner(monkeypatch, slow_resets=(2,))
    try:
        runner.run(test_mode=True)
        runner.run(test_mode=True)  # the second resets take too long: the workers are restarted
        assert runner.envs.restarts >= 1
    finally:
        runner.close_env()
    assert "env worker 0 did not answer within 1.5 s" in capsys.readouterr().out
