"""A server that runs `python src/main.py ARGV...` for the tests without paying Python's start-up each
time: it imports what main.py imports (torch, torch._dynamo, sacred, the src packages) and loads the
built-in simulator's compiled loops once, then forks one child per request, and the child executes
src/main.py afresh as `__main__` with the request's argv, environment and working directory, its stdout
and stderr in the files named, and exits as `python src/main.py` would. That start-up is about 4 s of
CPU per run (torch 1.5 s, torch._dynamo, which the first torch optimiser imports, 1.4 s, the compiled
loops 1 s); the suite starts main.py some 70 times on 2 cores.

Forking after these imports is safe: they start no threads (torch's thread pools start at the first
parallel op, in the child). What the child cannot see is an environment variable a library reads when
it is imported (torch's OMP_NUM_THREADS, Numba's settings): the server starts with the tests' own
(tests/main_runs.py), and tests that need another, or a real process tree, start main.py themselves.

Protocol, one JSON line each way on stdin/stdout: {"id", "argv", "env", "cwd", "stdout", "stderr",
"timeout"} -> {"id", "returncode"} (None when the run, or a process it left behind, outlived its
timeout and was killed). A request with "start": true is answered at once with {"id", "pid"}, so that
a test can signal the run (or its process group) meanwhile; {"id", "wait": pid, "timeout"} then waits
for it and answers {"id", "returncode"}."""
import atexit
import contextlib
import gc
import importlib
import json
import os
import runpy
import signal
import sys
import threading
import time
import traceback

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
MAIN = os.path.join(SRC, "main.py")


def preload() -> None:
    """Import main.py's modules (then forget main itself, which each child executes anew) and load the
    compiled loops, as a run of main.py would."""
    sys.path[0] = SRC  # as `python src/main.py` sets it
    importlib.import_module("torch._dynamo")  # what torch.optim's first optimiser imports
    importlib.import_module("main")
    del sys.modules["main"]
    from envs.starcraft.interface.warmup import compile_builtin_loops

    compile_builtin_loops()
    gc.freeze()  # the children's garbage collections then leave the inherited objects (and pages) alone


def run_child(request: dict) -> None:
    """In the forked child: become `python src/main.py ARGV`, then exit as that process would (its
    threads joined, its atexit handlers run), but without tearing down every module: in a forked child
    that teardown touches, and so copies, the whole inherited heap (3 s)."""
    os.setpgid(0, 0)  # its own process group, so that a timeout kills the run and its workers
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.stdin.close()  # the server's requests
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    sys.stdin = os.fdopen(0)
    files = {path: os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
             for path in (request["stdout"], request["stderr"])}  # one file when both name it
    os.dup2(files[request["stdout"]], 1)
    os.dup2(files[request["stderr"]], 2)
    for out in files.values():
        os.close(out)
    sys.argv = [MAIN, *request["argv"]]
    try:
        runpy.run_path(MAIN, run_name="__main__")
        code = 0
    except SystemExit as stop:
        code = stop.code
    except BaseException:  # noqa: B036  (as the interpreter reports an uncaught exception)
        traceback.print_exc()
        code = 1
    if not isinstance(code, int):  # sys.exit("message") prints the message and exits with 1
        if code is not None:
            print(code, file=sys.stderr)
        code = 0 if code is None else 1
    threading._shutdown()  # what the interpreter does first on exit: join the threads that are not daemons
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def group_alive(pid: int) -> bool:
    """Whether a process of the child's process group (its env workers, their forkserver) still runs.

    A zombie does not count: it has exited, and closed whatever it held of the run's output. The run leaves
    GitPython's `git cat-file` process (sacred reads the repository's state with it) to the system's
    reaper, which in some containers reaps every 2 s; a process-group signal test would wait for it."""
    if not os.path.isdir("/proc"):  # (no /proc: the signal test, zombies included)
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return False
        return True
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(os.path.join(entry.path, "stat")) as f:
                stat = f.read()
        except OSError:  # exited meanwhile
            continue
        state, _, group = stat.rpartition(")")[2].split()[:3]  # after "pid (command)": state, ppid, pgrp
        if int(group) == pid and state != "Z":
            return True
    return False


def wait(pid: int, timeout: float):
    """The child's exit code (negative: killed by that signal) once it and every process it left in its
    group have exited, as `subprocess.run` waits for whatever holds the run's output pipes; None when
    that took longer than timeout (the group is then killed)."""
    deadline = time.monotonic() + timeout
    code = None
    while code is None or group_alive(pid):
        if code is None:
            done, status = os.waitpid(pid, os.WNOHANG)
            code = os.waitstatus_to_exitcode(status) if done else None
        if time.monotonic() > deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if code is None:
                os.waitpid(pid, 0)
            return None
        time.sleep(0.02)
    return code


def start(request: dict) -> int:
    pid = os.fork()
    if pid == 0:
        run_child(request)
    with contextlib.suppress(ProcessLookupError):  # (the child does it too: whichever runs first)
        os.setpgid(pid, pid)  # before the pid is answered, so that a signal to its group finds the group
    return pid


def answer(request: dict) -> dict:
    if "wait" in request:
        return {"returncode": wait(request["wait"], request["timeout"])}
    pid = start(request)
    return {"pid": pid} if request.get("start") else {"returncode": wait(pid, request["timeout"])}


def serve() -> None:
    preload()
    requests, replies = sys.stdin, sys.stdout
    for line in requests:
        request = json.loads(line)
        replies.write(json.dumps({"id": request["id"], **answer(request)}) + "\n")
        replies.flush()


if __name__ == "__main__":
    serve()
