"""Running `python src/main.py` in a subprocess and reading what sacred wrote, for end-to-end tests."""
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAIN = os.path.join(REPO, "src", "main.py")


def run_main(*argv: str, timeout: int = 180) -> subprocess.CompletedProcess:
    """One training/evaluation run with single-threaded torch (the suite runs on 2 cores)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return subprocess.run([sys.executable, MAIN, *argv], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


def run_dir(results: str, group: str, name: str, run_id: int) -> str:
    return os.path.join(results, "sacred", group, name, str(run_id))


def read_json(folder: str, filename: str) -> dict:
    with open(os.path.join(folder, filename)) as f:
        return json.load(f)
