"""Runs batch_size_run envs in worker processes, one episode each per `run` call (PyMARL2's ParallelRunner).

Each worker owns one env and answers commands sent through a multiprocessing Pipe:
(command, data) -> ("ok", result) or ("error", traceback). Workers are started with the
"forkserver" method (fork is unsafe once torch threads exist): the server process imports
this module once and forks every worker from it, which is much cheaper than "spawn".
"""
import multiprocessing as mp
import signal
import traceback
from typing import Any, Callable

import torch as th

from runners.runner_base import BatchRunner, env_factory, observe, step_env

_START_METHOD = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
_CLOSE_TIMEOUT_S = 5


def _reset(env, _data) -> dict:
    env.reset()
    return observe(env)


_COMMANDS = {
    "reset": _reset,
    "step": step_env,
    "get_env_info": lambda env, _data: env.get_env_info(),
    "get_stats": lambda env, _data: env.get_stats(),
    "save_replay": lambda env, _data: env.save_replay(),
}


def env_worker(conn, env_fn: Callable, env_args: dict) -> None:
    """Worker process main: build the env, then serve commands until "close" (or the first error)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is handled by the parent, which closes us
    th.set_num_threads(1)
    try:
        env = env_fn(**env_args)
        while True:
            command, data = conn.recv()
            if command == "close":
                env.close()
                conn.send(("ok", None))
                break
            conn.send(("ok", _COMMANDS[command](env, data)))
    except Exception:
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


def _mp_context():
    ctx = mp.get_context(_START_METHOD)
    if _START_METHOD == "forkserver":
        # Preloading also hands the parent's sys.path (src/, test helpers) to the server.
        ctx.set_forkserver_preload([__name__])
    return ctx


class ParallelRunner(BatchRunner):

    def __init__(self, args, logger):
        super().__init__(args, logger)
        ctx = _mp_context()
        env_fn = env_factory(args.env)
        self.conns = []
        self.workers = []
        for seed in self.env_seeds:
            parent_conn, worker_conn = ctx.Pipe()
            worker = ctx.Process(target=env_worker, args=(worker_conn, env_fn, dict(args.env_args, seed=seed)),
                                 daemon=True)
            worker.start()
            worker_conn.close()  # only the worker holds its end now, so its death reads as EOF here
            self.conns.append(parent_conn)
            self.workers.append(worker)
        self.env_info = self._request(0, "get_env_info")

    def _send(self, i: int, command: str, data: Any = None) -> None:
        try:
            self.conns[i].send((command, data))
        except (BrokenPipeError, ConnectionResetError):
            self._recv(i)  # the worker is gone: raise its pending error message if it left one
            raise

    def _recv(self, i: int) -> Any:
        try:
            status, result = self.conns[i].recv()
        except EOFError:
            raise RuntimeError(f"env worker {i} (seed {self.env_seeds[i]}) exited unexpectedly") from None
        if status == "error":
            raise RuntimeError(f"env worker {i} (seed {self.env_seeds[i]}) failed; its traceback:\n{result}")
        return result

    def _request(self, i: int, command: str, data: Any = None) -> Any:
        self._send(i, command, data)
        return self._recv(i)

    def _broadcast(self, command: str) -> list:
        """Send `command` to every worker first, then collect the answers, so the envs work concurrently."""
        for i in range(self.batch_size):
            self._send(i, command)
        return [self._recv(i) for i in range(self.batch_size)]

    def _reset_envs(self) -> list:
        return self._broadcast("reset")

    def _step_envs(self, actions: dict) -> dict:
        for i, env_actions in actions.items():
            self._send(i, "step", env_actions)
        return {i: self._recv(i) for i in actions}

    def get_env_stats(self) -> list:
        return self._broadcast("get_stats")

    def save_replay(self) -> None:
        self._broadcast("save_replay")

    def close_env(self) -> None:
        """Ask every live worker to close its env, then reap the processes."""
        for i, worker in enumerate(self.workers):
            if worker.is_alive():
                try:
                    self._request(i, "close")
                except (RuntimeError, OSError) as error:
                    self.logger.console_logger.warning(f"closing env worker {i}: {error}")
        for worker in self.workers:
            worker.join(timeout=_CLOSE_TIMEOUT_S)
            if worker.is_alive():
                worker.terminate()
        for conn in self.conns:
            conn.close()
        self.workers = []
        self.conns = []
