"""Runs batch_size_run envs, one episode each per `run` call (PyMARL2's ParallelRunner), either
in the runner's own process or in one worker process per env (config key env_processes).

In-process (env_processes=main) the envs are stepped one after the other in a plain loop.
PyMARL2 always uses workers, but a worker costs a Pipe message each way per env step
(pickling, a wake-up and two process switches): 0.09-0.16 ms per env step on 2 cores, 15-25x
the null env's whole step and about half a built-in SMAC 3m step. Workers only pay when an env
step costs much more than that and there are cores to run the envs side by side, or when the
env needs isolation: a game process that may crash or hang (real StarCraft II).

In worker mode each worker owns one env and answers commands sent through a multiprocessing
Pipe: (command, data) -> ("ok", result) or ("error", traceback). Workers are started with the
"forkserver" method (fork is unsafe once torch threads exist): a server process, started with the
first worker, imports this module once and forks every worker from it, much cheaper than "spawn". Stop signals sent to the whole process group reach neither the
server nor the workers (the parent stops the run, saves and closes them); when the parent dies,
however it dies, the server exits and the kernel kills every worker with it, hung ones included.

Faults (workers only): the parent never waits on a Pipe for longer than env_worker_timeout
seconds. A worker that died or stopped answering is killed (with any process it started, e.g. a
game) and started again with a fresh seed, and the unfinished episode batch is played again
from the start; after env_worker_max_failures such failures in a row the run stops. An env that
raises an exception is a bug, not a fault: its traceback is raised in the parent at once.
Workers that one cause took down together (the server killed) are restarted as one failure.
"""
import contextlib
import multiprocessing as mp
import os
import signal
import time
import traceback
from typing import Any, Callable, Iterator

import numpy as np
import psutil
import torch as th

from components.episode_buffer import EpisodeBatch
from envs import STARCRAFT_ENVS
from envs.death_signal import die_with_parent
from envs.starcraft.interface.backend import select_backend
from envs.starcraft.interface.warmup import compile_builtin_loops
from runners.runner_base import (BatchRunner, InProcessEnvs, env_factory, env_kwargs, env_seed, env_seeds, reset_env,
                                 step_env)
from utils.stop import StoppedWaiting, stop_requested

_START_METHOD = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
_CLOSE_TIMEOUT_S = 5
_POLL_S = 1.0  # how often a waiting parent checks its worker, and a waiting worker its parent
DEFAULT_WORKER_TIMEOUT_S = 120.0
DEFAULT_MAX_FAILURES = 3
# A new worker imports the main module and builds its env, whose first reset may launch a game (real
# StarCraft II takes long to start): its answers up to its first reset's may take this long even
# when env_worker_timeout is shorter.
_START_TIMEOUT_S = 60.0
# After a stop signal, a worker that has not answered yet gets this long before the wait is given up.
STOP_GRACE_S = 5.0
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_SRC_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ENV_PROCESSES = ("auto", "main", "workers")
# Envs whose step costs microseconds, that draw from their own seeded generators only and start
# no other process: env_processes=auto steps them in the main process.
IN_PROCESS_ENVS = ("null", "one_step_matrix_game", "stag_hunt", "small_stag_hunt")
# SMAC on the built-in simulator runs in the main process up to this many usable cores: on 2 cores
# it collected 1.1-1.8x faster than workers on 3m, 0.94-1.9x on corridor and 1.1-1.7x on
# 27m_vs_30m, the more so the busier the machine (bench/bench_runner.py). With more cores the
# workers step the envs side by side, so auto keeps PyMARL2's workers there.
BUILTIN_SMAC_MAX_CORES = 2
# gymma's Python tasks LBF, RWARE and MPE step in well under a millisecond, less than a worker's round trip:
# 8,000 steps of mappo (10 envs) on LBF 8x8-2p-3f took 9.7 s in the main process against 29.5 s with workers
# on the 2-core machine (other runs beside it, 2026-12-03). Other gymma tasks keep their workers; VMAS must:
# its scenarios keep one random state for all VMAS envs of a process, so envs stepped side by side in one
# process would not follow their own seeds.
GYMMA_IN_PROCESS_PREFIXES = ("lbforaging:", "rware:", "pz-mpe-")


def uses_workers(args) -> bool:
    """Whether the parallel runner steps its envs in worker processes (see env_processes in default.yaml)."""
    mode = getattr(args, "env_processes", "auto")
    if mode not in ENV_PROCESSES:
        raise ValueError(f"env_processes={mode!r} is not one of {', '.join(ENV_PROCESSES)}: main steps the envs "
                         f"in the training process, workers in one process per env, auto picks by env")
    replays = getattr(args, "save_replay", False) and args.batch_size_run > 1
    if mode == "main" and replays:
        raise ValueError("save_replay=True with env_processes=main and batch_size_run > 1: the envs of one "
                         "process would write their replays to the same file; use env_processes=workers")
    if mode != "auto":
        return mode == "workers"
    return replays or not _cheap_env(args.env, args.env_args)


def _on_builtin_simulator(env_name: str, env_args: dict) -> bool:
    """Whether the env is SMAC or SMACv2 on the built-in simulator (not the real game)."""
    return env_name in STARCRAFT_ENVS and select_backend(env_args.get("backend", "auto"),
                                                env_args.get("map_name", "")) == "builtin"


def _cheap_env(env_name: str, env_args: dict) -> bool:
    """Measured to run faster in the main process: the small envs, gymma's Python tasks, and SMAC on the
    built-in simulator on a machine with few cores."""
    if env_name in STARCRAFT_ENVS:
        return _on_builtin_simulator(env_name, env_args) and usable_cores() <= BUILTIN_SMAC_MAX_CORES
    if env_name == "gymma":
        return str(env_args.get("key", "")).startswith(GYMMA_IN_PROCESS_PREFIXES)
    return env_name in IN_PROCESS_ENVS


def usable_cores() -> int:
    """CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


_COMMANDS = {
    "reset": lambda env, _data: reset_env(env),
    "step": step_env,
    "get_env_info": lambda env, _data: env.get_env_info(),
    "get_stats": lambda env, _data: env.get_stats(),
    "save_replay": lambda env, _data: env.save_replay(),
}


def _release_forkserver() -> None:
    """Close this worker's copy of the forkserver's liveness pipe, which multiprocessing hands every
    process it forks. The forkserver exits once the main process is gone and no one else holds the
    pipe: with the workers holding it, a worker hung in env.step (or stopped) would keep the
    forkserver, and so itself, alive forever after the main process was killed."""
    from multiprocessing import forkserver
    server = forkserver._forkserver
    if getattr(server, "_forkserver_alive_fd", None) is not None:
        os.close(server._forkserver_alive_fd)
        server._forkserver_alive_fd = None


def _ignore(_signum, _frame) -> None:
    pass


def env_worker(conn, env_fn: Callable, env_args: dict) -> None:
    """Worker process main: build the env, then serve commands until "close", the first error,
    or the end of the parent process. The env is closed on every way out (a process it started, such
    as a game, would otherwise outlive the worker: a worker process skips atexit): before the error's
    traceback is sent, so that the parent hears of the error only once the env is closed."""
    for sig in _STOP_SIGNALS:
        # A stop signal sent to the whole process group (Ctrl+C, systemd, Slurm) is the parent's to
        # handle: it saves and then closes us; only SIGKILL ends a worker otherwise. A handler that does
        # nothing, not SIG_IGN, which a process the env starts (a game) would inherit.
        signal.signal(sig, _ignore)
    parent = os.getppid()
    die_with_parent()  # killed with its parent, even while the env hangs
    if _START_METHOD == "forkserver":
        _release_forkserver()
    th.set_num_threads(1)

    def close_quietly(env) -> str:
        """Close `env` (if any) after a failure; returns "" or the close's own traceback, to report along."""
        if env is None:
            return ""
        try:
            env.close()
        except Exception:
            return "\nClosing the env after that failed too:\n" + traceback.format_exc()
        return ""

    env = None
    try:
        env = env_fn(**env_args)
        while True:
            if not conn.poll(_POLL_S):
                if os.getppid() != parent:
                    break  # orphaned: nobody will read our answers
                continue
            command, data = conn.recv()
            if command == "close":
                break
            conn.send(("ok", _COMMANDS[command](env, data)))
        env, closing = None, env
        closing.close()
        conn.send(("closed", None))
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass  # the parent is gone
    except Exception:
        message = traceback.format_exc()
        env, closing = None, env
        message += close_quietly(closing)
        _send_quietly(conn, ("error", message))
    finally:
        close_quietly(env)
        conn.close()


def _send_quietly(conn, message: tuple) -> None:
    try:
        conn.send(message)
    except OSError:
        pass  # the parent is gone


def _mp_context():
    ctx = mp.get_context(_START_METHOD)
    if _START_METHOD == "forkserver":
        # The server imports these when it starts: forkserver_signals makes it ignore stop signals sent
        # to the whole process group; this module (with torch) makes every worker start ready-made.
        ctx.set_forkserver_preload(["runners.forkserver_signals", __name__])
    return ctx


@contextlib.contextmanager
def _src_importable() -> Iterator[None]:
    """PYTHONPATH names marlkit's src/ for the body, so that a forkserver started meanwhile (with the
    first worker) can import its preload modules; multiprocessing does not hand it this process's
    sys.path, and silently skips a preload module it cannot import."""
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([_SRC_DIR, *([old] if old else [])])
    try:
        yield
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old


def _kill_process_tree(process) -> None:
    """SIGKILL a worker process and everything it started (e.g. a StarCraft II game)."""
    try:
        children = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    for child in children:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass
    process.kill()
    process.join(timeout=_CLOSE_TIMEOUT_S)


class EnvWorkerFault(RuntimeError):
    """A worker died or did not answer in time; the runner restarts it."""

    def __init__(self, index: int, reason: str):
        super().__init__(f"env worker {index} {reason}")
        self.index = index


class EnvWorkerError(RuntimeError):
    """Env workers kept failing: the run cannot go on."""


class EnvWorkers:
    """One worker process per env, with the interface of runner_base.InProcessEnvs, plus restarts."""

    def __init__(self, args, logger, seed_generation: int):
        self.args = args
        self.logger = logger
        self.n_envs = args.batch_size_run
        self.timeout_s = float(getattr(args, "env_worker_timeout", DEFAULT_WORKER_TIMEOUT_S))
        self.seeds = env_seeds(args.env_args.get("seed"), self.n_envs, seed_generation)
        self.seed_generation = seed_generation
        self.restarts = 0
        self._ctx = _mp_context()
        self._env_fn = env_factory(args.env)
        self.conns = [None] * self.n_envs
        self.workers = [None] * self.n_envs
        self.waiting = set()  # workers sent a command whose answer has not been read yet
        # Workers started whose env has not answered a reset yet: the first reset launches the game
        # (real StarCraft II), so their answers until then may take _START_TIMEOUT_S.
        self.starting = set()
        self._told_stopping = set()  # workers whose wait after a stop signal was announced
        if _on_builtin_simulator(args.env, args.env_args):
            # Compiled here once, the workers load the loops from Numba's cache instead of each
            # compiling them at once on a fresh install (see compile_builtin_loops).
            compile_builtin_loops()
        for i in range(self.n_envs):
            self._start_worker(i)

    def _start_worker(self, i: int) -> None:
        parent_conn, worker_conn = self._ctx.Pipe()
        worker = self._ctx.Process(target=env_worker, daemon=True,
                                   args=(worker_conn, self._env_fn,
                                         env_kwargs(self.args.env_args, self.seeds[i], i, self.n_envs)))
        with _src_importable():
            worker.start()
        worker_conn.close()  # only the worker holds its end now, so its death reads as EOF here
        self.conns[i] = parent_conn
        self.workers[i] = worker
        self.starting.add(i)

    def recover(self, fault: EnvWorkerFault, t_env: int) -> None:
        """Restart the failed worker and every other one found dead, then read the answers still due,
        so every Pipe is in step again: one failure, however many workers one cause took (the
        forkserver's death, a signal to the process group)."""
        self._restart_worker(fault.index, str(fault), t_env)
        for i, worker in enumerate(self.workers):
            if i != fault.index and not worker.is_alive():
                self._restart_worker(i, f"env worker {i} exited too (exit code {worker.exitcode})", t_env)
        for i in sorted(self.waiting):
            try:
                self._recv(i)
            except EnvWorkerFault as other:
                self._restart_worker(i, str(other), t_env)

    def _restart_worker(self, i: int, reason: str, t_env: int) -> None:
        _kill_process_tree(self.workers[i])
        self.conns[i].close()
        self.waiting.discard(i)
        self.starting.discard(i)
        self.seed_generation += 1
        self.seeds[i] = env_seed(self.args.env_args.get("seed"), i, self.n_envs, self.seed_generation)
        self._start_worker(i)
        self.restarts += 1
        self.logger.console_logger.warning(f"{reason}: restarted it with seed {self.seeds[i]} and dropped "
                                           f"the unfinished episode batch ({self.restarts} restarts so far)")
        self.logger.log_stat("env_worker_restarts", self.restarts, t_env)

    def _send(self, i: int, command: str, data: Any = None) -> None:
        try:
            self.conns[i].send((command, data))
        except (BrokenPipeError, ConnectionResetError):
            self._recv(i)  # the worker is gone: raise its pending error message if it left one
            raise EnvWorkerFault(i, "exited unexpectedly") from None
        self.waiting.add(i)

    def _recv(self, i: int) -> Any:
        """The answer of worker i; EnvWorkerFault when it has died or not answered within timeout_s."""
        conn, worker = self.conns[i], self.workers[i]
        timeout_s = max(self.timeout_s, _START_TIMEOUT_S) if i in self.starting else self.timeout_s
        deadline = time.monotonic() + timeout_s
        while not conn.poll(min(_POLL_S, max(0.0, deadline - time.monotonic()))):
            if not worker.is_alive():
                raise EnvWorkerFault(i, f"exited unexpectedly (exit code {worker.exitcode})")
            if time.monotonic() >= deadline:
                raise EnvWorkerFault(i, f"did not answer within {timeout_s:g} s (env_worker_timeout="
                                        f"{self.timeout_s:g}, {_START_TIMEOUT_S:g} s at start-up)")
            self._give_up_if_stopping(i)
        try:
            status, result = conn.recv()
        except (EOFError, OSError):
            worker.join(timeout=_POLL_S)
            raise EnvWorkerFault(i, f"exited unexpectedly (exit code {worker.exitcode})") from None
        self.waiting.discard(i)
        if status == "error":
            raise RuntimeError(f"env worker {i} (seed {self.seeds[i]}) failed; its traceback:\n{result}")
        return result

    def _give_up_if_stopping(self, i: int) -> None:
        """Once a stop signal came, wait at most STOP_GRACE_S for worker i (saying so), then raise
        StoppedWaiting: a hung worker must not hold up the stop for env_worker_timeout."""
        request = stop_requested()
        if request is None:
            return
        name, since = request
        if i not in self._told_stopping:
            self._told_stopping.add(i)
            self.logger.console_logger.warning(f"{name}: waiting at most {STOP_GRACE_S:g} s for env worker {i} "
                                               f"(seed {self.seeds[i]}) to answer before stopping without it")
        if time.monotonic() - since >= STOP_GRACE_S:
            raise StoppedWaiting(f"env worker {i} did not answer within {STOP_GRACE_S:g} s of {name}")

    def _broadcast(self, command: str) -> list:
        """Send `command` to every worker first, then collect the answers, so the envs work concurrently."""
        for i in range(self.n_envs):
            self._send(i, command)
        return [self._recv(i) for i in range(self.n_envs)]

    def env_info(self) -> dict:
        self._send(0, "get_env_info")
        return self._recv(0)

    def reset(self) -> list:
        observations = self._broadcast("reset")
        self.starting.clear()  # every env has answered a reset: its game is up
        return observations

    def step(self, indices: list, actions: np.ndarray) -> list:
        """Step env indices[k] with actions[k] ([len(indices), n_agents]); one Transition per stepped env."""
        for i, env_actions in zip(indices, actions):
            self._send(i, "step", env_actions)
        return [self._recv(i) for i in indices]

    def get_stats(self) -> list:
        return self._broadcast("get_stats")

    def save_replay(self) -> list:
        return self._broadcast("save_replay")

    def close(self) -> None:
        """Ask every worker to close its env, wait up to _CLOSE_TIMEOUT_S in all, then kill the rest."""
        deadline = time.monotonic() + _CLOSE_TIMEOUT_S
        for conn in self.conns:
            _send_quietly(conn, ("close", None))
        for i in range(len(self.workers)):
            self._await_closed(i, deadline)
        for worker in self.workers:
            worker.join(timeout=max(0.0, deadline - time.monotonic()))
            if worker.is_alive():
                _kill_process_tree(worker)
        for conn in self.conns:
            conn.close()
        self.workers = []
        self.conns = []
        self.waiting = set()

    def _await_closed(self, i: int, deadline: float) -> None:
        """Read worker i's messages (answers still due first) until it confirms the close."""
        conn = self.conns[i]
        try:
            while conn.poll(max(0.0, deadline - time.monotonic())):
                status, result = conn.recv()
                if status == "closed":
                    return
                if status == "error":
                    self.logger.console_logger.warning(f"closing env worker {i}: {result}")
                    return
        except (EOFError, OSError):
            return  # already gone
        self.logger.console_logger.warning(f"env worker {i} did not close within {_CLOSE_TIMEOUT_S} s; killing it")


class ParallelRunner(BatchRunner):

    def __init__(self, args, logger):
        super().__init__(args, logger)
        self.max_failures = int(getattr(args, "env_worker_max_failures", DEFAULT_MAX_FAILURES))
        self.consecutive_failures = 0
        if uses_workers(args):
            self.envs = EnvWorkers(args, logger, self.first_seed_generation)
        else:
            self.envs = InProcessEnvs(args.env, args.env_args, self.batch_size, self.first_seed_generation)
        self.env_info = self.envs.env_info()

    def run(self, test_mode: bool = False) -> EpisodeBatch:
        """One episode per env; when a worker fails, restart it and play the whole batch again."""
        while True:
            try:
                batch = super().run(test_mode)
            except EnvWorkerFault as fault:
                self._recover(fault)
                continue
            self.consecutive_failures = 0
            return batch

    def _recover(self, fault: EnvWorkerFault) -> None:
        self.consecutive_failures += 1
        if self.consecutive_failures >= self.max_failures:
            raise EnvWorkerError(f"{fault}; {self.consecutive_failures} env worker failures in a row "
                                 f"(env_worker_max_failures={self.max_failures}): stopping the run") from None
        self.envs.recover(fault, self.t_env)
