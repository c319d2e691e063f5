"""Running `python src/main.py` (through tests/main_server.py, or as a new process) and reading what
sacred wrote, for end-to-end tests."""
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAIN = os.path.join(REPO, "src", "main.py")
SERVER = os.path.join(REPO, "tests", "main_server.py")


class _MainServer:
    """tests/main_server.py, started on first use, one per test process."""

    def __init__(self) -> None:
        self.process = None
        self.log = tempfile.TemporaryFile("w+")  # the server's own stderr (what it logs while loading)

    def run(self, argv: list, env: dict, timeout: float) -> subprocess.CompletedProcess:
        if self.process is None or self.process.poll() is not None:
            self.process = subprocess.Popen([sys.executable, SERVER], cwd=REPO, env=env, text=True,
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        with tempfile.TemporaryDirectory() as folder:
            out, err = os.path.join(folder, "stdout"), os.path.join(folder, "stderr")
            request = {"argv": list(argv), "env": env, "cwd": REPO, "stdout": out, "stderr": err,
                       "timeout": timeout}
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            reply = self.process.stdout.readline()
            if not reply:
                self.log.seek(0)
                raise RuntimeError(f"tests/main_server.py exited with {self.process.wait()}:\n{self.log.read()[-3000:]}")
            stdout, stderr = (open(path).read() for path in (out, err))
        returncode = json.loads(reply)["returncode"]
        command = [sys.executable, MAIN, *argv]
        if returncode is None:
            raise subprocess.TimeoutExpired(command, timeout, stdout, stderr)
        return subprocess.CompletedProcess(command, returncode, stdout, stderr)


_server = _MainServer()


def run_main(*argv: str, timeout: int = 180, fresh: bool = False) -> subprocess.CompletedProcess:
    """One training/evaluation run with single-threaded torch (the suite runs on 2 cores): by default
    through tests/main_server.py, which saves the interpreter's start-up; with fresh=True as a new
    `python src/main.py` process."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    if not fresh:
        return _server.run(argv, env, timeout)
    return subprocess.run([sys.executable, MAIN, *argv], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


def run_dir(results: str, group: str, name: str, run_id: int) -> str:
    return os.path.join(results, "sacred", group, name, str(run_id))


def read_json(folder: str, filename: str) -> dict:
    with open(os.path.join(folder, filename)) as f:
        return json.load(f)
