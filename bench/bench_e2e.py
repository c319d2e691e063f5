"""End-to-end training speed, memory and time-to-win of `src/main.py` with algs/qmix.yaml unchanged.

Usage (from the repository root):
    python bench/bench_e2e.py {null,corridor,3m} [--t-max N] [--warm-steps 30000] [--win 0.95]
                              [--repo PATH] [KEY=VALUE ...]  # KEY=VALUE: main.py `with` overrides
    python bench/bench_e2e.py null [--t-max 100000]     # zero-cost env with corridor's shapes
    python bench/bench_e2e.py corridor [--t-max 100000] # built-in SMAC simulator, corridor
    python bench/bench_e2e.py 3m [--t-max 600000]       # built-in simulator, 3m: time to win
    python bench/bench_e2e.py null --repo ../old-checkout  # the same run on another checkout
    python bench/bench_e2e.py null train_precision=float32  # with a config override

Each workload runs main.py once in a subprocess and reads its console: the time at which each
test starts ("t_env: N / t_max") gives the steady rate, env steps per second between the first
test at or after --warm-steps (training has started by then) and the last one; "overall" is
t_max over the whole wall-clock, start-up and buffer filling included. The whole process tree's
memory (main process and env workers, proportional set size so shared pages count once) is
polled every 0.25 s and its peak printed. For 3m the run stops once the greedy test win rate
(test_battle_won_mean) reaches --win, and the wall-clock to the first test at >= 0.8 and >= --win
is printed (the clock starts when main.py is launched).
"""
import argparse
import datetime
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

import psutil

from machine_info import describe_machine  # bench/ is on sys.path when a benchmark runs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = {
    "null": ["--config=qmix", "--env-config=null", "with", "env_args.map_name=corridor"],
    "corridor": ["--config=qmix", "--env-config=sc2", "with", "env_args.map_name=corridor",
                 "env_args.backend=builtin"],
    "3m": ["--config=qmix", "--env-config=sc2", "with", "env_args.map_name=3m", "env_args.backend=builtin"],
}
DEFAULT_T_MAX = {"null": 100000, "corridor": 100000, "3m": 600000}
TEST_LINE = re.compile(r"t_env: (\d+) / \d+")
WIN_STAT = re.compile(r"test_battle_won_mean:\s+([0-9.]+)")
PRECISION_LINE = re.compile(r"Training step matmuls in (\S+ \(.*\))")
POLL_S = 0.25


def tree_memory(root: psutil.Process) -> int:
    """Proportional set size of `root` and all its descendants, in bytes (RSS where PSS is unreadable)."""
    total = 0
    for process in [root, *root.children(recursive=True)]:
        try:
            info = process.memory_full_info()
            total += getattr(info, "pss", info.rss)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total


class MemoryPoller(threading.Thread):
    """Keeps the peak of tree_memory(pid) until stopped."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.peak = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(POLL_S):
            try:
                self.peak = max(self.peak, tree_memory(self.root))
            except psutil.NoSuchProcess:
                return


def stop_tree(process: subprocess.Popen) -> None:
    """Kill main.py and its env workers (used once the 3m run has reached the win-rate target)."""
    for child in psutil.Process(process.pid).children(recursive=True):
        child.kill()
    process.kill()


def run_workload(repo: str, argv: list, win: float | None) -> dict:
    """Run main.py with `argv`; returns the (seconds, t_env) of each test start, the seconds of the
    first test at >= 0.8 and >= win (3m), the total seconds and the peak tree memory."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, os.path.join(repo, "src", "main.py"), *argv], cwd=repo, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    poller = MemoryPoller(process.pid)
    poller.start()
    tests, reached, tail, precision = [], {}, [], "not logged"
    for line in process.stdout:
        now = time.perf_counter() - start
        tail = (tail + [line])[-30:]
        if match := PRECISION_LINE.search(line):
            precision = match.group(1)
        if match := TEST_LINE.search(line):
            tests.append((now, int(match.group(1))))
        if win is not None and (match := WIN_STAT.search(line)):
            rate = float(match.group(1))
            for threshold in (0.8, win):
                if rate >= threshold and threshold not in reached:
                    reached[threshold] = (now, tests[-1][1] if tests else 0)
            if win in reached:
                stop_tree(process)
                break
    process.wait()
    poller.done.set()
    poller.join()
    if process.returncode not in (0, -9):
        raise SystemExit(f"main.py failed (exit code {process.returncode}); its last lines:\n{''.join(tail)}")
    return {"tests": tests, "reached": reached, "seconds": time.perf_counter() - start, "peak": poller.peak,
            "precision": precision}


def steady_window(tests: list, warm_steps: int) -> tuple[tuple[float, int], tuple[float, int]]:
    """(seconds, t_env) of the first test start at or after warm_steps and of the last one."""
    warm = [(s, t) for s, t in tests if t >= warm_steps]
    if len(warm) < 2:
        raise SystemExit(f"too few tests after {warm_steps} steps to measure a steady rate; raise --t-max")
    return warm[0], warm[-1]


def steady_rate(tests: list, warm_steps: int) -> float:
    """Env steps per second between the first test start at or after warm_steps and the last one."""
    (s0, t0), (s1, t1) = steady_window(tests, warm_steps)
    return (t1 - t0) / (s1 - s0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=sorted(WORKLOADS))
    parser.add_argument("--t-max", type=int, default=None, help="env steps of the run (default per workload)")
    parser.add_argument("--warm-steps", type=int, default=30000, help="steady rate counted from this t_env")
    parser.add_argument("--win", type=float, default=0.95, help="3m: test win rate at which to stop")
    parser.add_argument("--repo", default=REPO, help="checkout whose src/main.py runs (default: this one)")
    parser.add_argument("overrides", nargs="*", help="extra `with` overrides, e.g. buffer_size=5000")
    args = parser.parse_intermixed_args(argv)
    t_max = args.t_max or DEFAULT_T_MAX[args.workload]
    repo = os.path.abspath(args.repo)
    shown = " ".join([f"--t-max {t_max}", f"--warm-steps {args.warm_steps}", f"--win {args.win}"]
                     + ([f"--repo {args.repo}"] if args.repo != REPO else []) + args.overrides)
    print(f"command: python bench/bench_e2e.py {args.workload} {shown}")
    print(f"machine: {describe_machine()}")
    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}; repo: {repo}")
    with tempfile.TemporaryDirectory() as results:
        run_argv = WORKLOADS[args.workload] + [f"t_max={t_max}", f"local_results_path={results}", *args.overrides]
        result = run_workload(repo, run_argv, args.win if args.workload == "3m" else None)
    print(f"training step matmuls in {result['precision']}")
    print(f"wall-clock {result['seconds']:.1f} s, peak memory of the process tree {result['peak'] / 1e9:.2f} GB")
    if args.workload == "3m":
        for threshold in (0.8, args.win):
            if threshold in result["reached"]:
                seconds, t_env = result["reached"][threshold]
                print(f"test_battle_won_mean >= {threshold}: {seconds:.0f} s ({seconds / 60:.2f} min), t_env {t_env}")
            else:
                print(f"test_battle_won_mean >= {threshold}: not reached within t_max {t_max}")
        return
    print(f"overall {t_max / result['seconds']:.0f} env steps/s; "
          f"steady {steady_rate(result['tests'], args.warm_steps):.0f} env steps/s (from t_env {args.warm_steps})")


if __name__ == "__main__":
    main()
