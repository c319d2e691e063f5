"""Running `python src/main.py` (through tests/main_server.py, or as a new process) and reading what
sacred wrote, for end-to-end tests."""
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAIN = os.path.join(REPO, "src", "main.py")
SERVER = os.path.join(REPO, "tests", "main_server.py")


# The environment the tests started with (before any test's monkeypatching): the server's, so that
# what libraries read from it when imported is the same for every run.
def one_thread_env() -> dict:
    """This process's environment with single-threaded torch (the suite runs on 2 cores)."""
    return dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


SERVER_ENV = one_thread_env()


class _MainServer:
    """tests/main_server.py, started on first use, one per test process."""

    def __init__(self) -> None:
        self.process = None
        self.requests = 0
        self.log = tempfile.TemporaryFile("w+")  # the server's own stderr (what it logs while loading)

    def run(self, argv: list, env: dict, timeout: float) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory() as folder:
            out, err = os.path.join(folder, "stdout"), os.path.join(folder, "stderr")
            reply = self.ask({"argv": list(argv), "env": env, "cwd": REPO, "stdout": out, "stderr": err,
                              "timeout": timeout})
            stdout, stderr = (open(path).read() for path in (out, err))
        command = [sys.executable, MAIN, *argv]
        if reply["returncode"] is None:
            raise subprocess.TimeoutExpired(command, timeout, stdout, stderr)
        return subprocess.CompletedProcess(command, reply["returncode"], stdout, stderr)

    def ask(self, request: dict) -> dict:
        """The server's reply to `request` (an id added), the server started first if it is not running."""
        if self.process is None or self.process.poll() is not None:
            self.process = subprocess.Popen([sys.executable, SERVER], cwd=REPO, env=SERVER_ENV, text=True,
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        self.requests += 1
        try:
            return self._ask({"id": self.requests, **request})
        except BaseException:
            self.process.kill()  # a reply left unread would answer the next request
            self.process = None
            raise

    def _ask(self, request: dict) -> dict:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            self.log.seek(0)
            raise RuntimeError(f"tests/main_server.py exited with {self.process.wait()}:\n{self.log.read()[-3000:]}")
        reply = json.loads(line)
        if reply["id"] != request["id"]:
            raise RuntimeError(f"tests/main_server.py answered request {reply['id']}, not {request['id']}")
        return reply


_server = _MainServer()


def run_main(*argv: str, timeout: int = 180, fresh: bool = False) -> subprocess.CompletedProcess:
    """One training/evaluation run with single-threaded torch (the suite runs on 2 cores): by default
    through tests/main_server.py, which saves the interpreter's start-up; with fresh=True as a new
    `python src/main.py` process."""
    env = one_thread_env()
    if not fresh:
        return _server.run(argv, env, timeout)
    return subprocess.run([sys.executable, MAIN, *argv], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


class StartedRun:
    """A run of main.py started through the server without waiting for it, in a process group of its own
    (its pid is the group's id), with the part of subprocess.Popen's interface that the tests use. Unlike
    Popen's, its wait lasts until every process left in its group has exited too, and a timeout kills the
    group."""

    def __init__(self, argv: list, output: str) -> None:
        env = one_thread_env()
        self.args = [sys.executable, MAIN, *argv]
        open(output, "w").close()  # there (and empty) from the start, as Popen's stdout file would be
        self.pid = _server.ask({"argv": list(argv), "env": env, "cwd": REPO, "stdout": output, "stderr": output,
                                "start": True})["pid"]
        self.server = _server.process  # only this server can wait for it
        self.returncode = None

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:  # (a pid that was waited for may be another process's by now)
            os.kill(self.pid, sig)

    def wait(self, timeout: float) -> int:
        if self.returncode is None:
            if _server.process is not self.server:
                raise RuntimeError(f"tests/main_server.py was restarted: run {self.pid} cannot be waited for")
            code = _server.ask({"wait": self.pid, "timeout": timeout})["returncode"]
            self.returncode = -signal.SIGKILL if code is None else code
            if code is None:
                raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def kill(self) -> None:
        """Kill its whole group, unless it was waited for already (and reap it, if its server still runs)."""
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            if _server.process is self.server:
                self.wait(timeout=30)
            self.returncode = -signal.SIGKILL


def start_main(*argv: str, output, fresh: bool = False) -> StartedRun | subprocess.Popen:
    """`python src/main.py ARGV` with single-threaded torch, its stdout and stderr in the file `output`, in a
    process group of its own, not waited for: through tests/main_server.py, or with fresh=True as a new
    process (a real interpreter's start-up and shutdown)."""
    if not fresh:
        return StartedRun(list(argv), str(output))
    with open(output, "w") as out:
        return subprocess.Popen([sys.executable, MAIN, *argv], cwd=REPO, env=one_thread_env(), stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


def wait_until_training(proc, log_path, runs: int, timeout_s: float) -> None:
    """Return once `runs` runs of a started main.py (the seeds of a batch) log "Beginning training", and a
    second more; kill it and fail, with its log's end, if that takes longer than timeout_s."""
    deadline = time.monotonic() + timeout_s
    while log_path.read_text().count("Beginning training") < runs and time.monotonic() < deadline:
        time.sleep(0.2)
    if log_path.read_text().count("Beginning training") < runs:
        proc.kill()
        raise AssertionError(f"{runs} run(s) did not begin training within {timeout_s:g} s:\n"
                             f"{log_path.read_text()[-3000:]}")
    time.sleep(1.0)


def run_dir(results: str, group: str, name: str, run_id: int) -> str:
    return os.path.join(results, "sacred", group, name, str(run_id))


def read_json(folder: str, filename: str) -> dict:
    with open(os.path.join(folder, filename)) as f:
        return json.load(f)


SPREAD = "pz-mpe-simple-spread-v3"
# A short run on MPE's simple spread with saved models: 10-step episodes, tests and logs every 40 steps.
SPREAD_SHORT = ["--env-config=gymma", "with", f"env_args.key={SPREAD}", "env_args.time_limit=10", "test_nepisode=2",
                "test_interval=40", "log_interval=40", "learner_log_interval=40", "runner_log_interval=40",
                "save_model=True", "save_model_interval=40", "hidden_dim=16"]


def train_on_spread(results, config: str, name: str, resume: bool, *overrides: str) -> tuple[dict, dict]:
    """Train `config` (results under `name`) for 80 steps of SPREAD_SHORT plus `overrides` from the command
    line; with `resume`, continue the saved run to 120 steps and check that it resumed. Returns the first
    run's (config.json, info.json)."""
    common = [f"--config={config}", *SPREAD_SHORT, *overrides, f"local_results_path={results}"]
    proc = run_main(*common, "t_max=80")
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = run_dir(str(results), SPREAD, name, 1)
    config_json, info = read_json(folder, "config.json"), read_json(folder, "info.json")
    if resume:
        checkpoint = os.path.join(str(results), "models", config_json["unique_token"])
        resumed = run_main(*common, "t_max=120", "resume=True", f"checkpoint_path={checkpoint}")
        assert resumed.returncode == 0 and "Resumed at t_env" in resumed.stderr, resumed.stderr[-3000:]
    return config_json, info
