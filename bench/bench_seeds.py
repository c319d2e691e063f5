"""Several seeds in one process (`seeds=[...]`) against one single-seed run: total env steps per second
and peak memory, on the same workload, one run after the other.

Usage (from the repository root):
    python bench/bench_seeds.py {null,protoss_5_vs_5} [--seeds 1 2 4] [--t-max N] [--warm-steps N] [KEY=VALUE ...]
    python bench/bench_seeds.py null --seeds 1 4 8 --t-max 60000     # qmix on the zero-cost env, corridor's shapes
    python bench/bench_seeds.py protoss_5_vs_5 --seeds 1 4 --t-max 40000  # qmix on SMACv2's scenario
    python bench/bench_seeds.py gil    # a training step alone and beside a thread running Python

For each count S of --seeds, main.py runs once with algs/qmix.yaml unchanged: S = 1 as the single run
`seed=1` with its defaults (learner_threads 0: torch's thread count), S > 1 as `seeds=[1..S]`. The steady
rate is the env steps all its seeds took per second in the window where every seed had passed
--warm-steps (training had started) and none had finished, read from the time each test line
("seed N | t_env: ...") reached the console; "overall" is S * t_max over the whole wall-clock, start-up
included. Peak memory: the process tree's proportional set size, polled every 0.25 s (bench_e2e's).
"""
import argparse
import datetime
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

from bench_e2e import REPO, MemoryPoller, WORKLOADS  # bench/ is on sys.path when a benchmark runs
from machine_info import describe_machine

SEED_WORKLOADS = {
    "null": WORKLOADS["null"],
    # sc2v2.yaml tests every 50,000 steps: here every 5,000 on 8 episodes, so that the test lines time the run.
    "protoss_5_vs_5": ["--config=qmix", "--env-config=sc2v2", "with", "env_args.map_name=protoss_5_vs_5",
                       "env_args.backend=builtin", "test_interval=5000", "test_nepisode=8"],
}
LANE_TEST_LINE = re.compile(r"(?:seed (\d+) \| )?t_env: (\d+) / \d+")


def run_seeds(argv: list) -> dict:
    """Run main.py with `argv`; {seed label: [(seconds, t_env) of each test start]}, seconds, peak memory."""
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, os.path.join(REPO, "src", "main.py"), *argv], cwd=REPO,
                               env=dict(os.environ, PYTHONUNBUFFERED="1"), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    poller = MemoryPoller(process.pid)
    poller.start()
    tests, tail = {}, []
    for line in process.stdout:
        tail = (tail + [line])[-30:]
        if match := LANE_TEST_LINE.search(line):
            tests.setdefault(match.group(1) or "single", []).append((time.perf_counter() - start,
                                                                      int(match.group(2))))
    process.wait()
    poller.done.set()
    poller.join()
    if process.returncode != 0:
        raise SystemExit(f"main.py failed (exit code {process.returncode}); its last lines:\n{''.join(tail)}")
    return {"tests": tests, "seconds": time.perf_counter() - start, "peak": poller.peak}


def steady_total_rate(tests: dict, warm_steps: int) -> float:
    """Env steps per second of all seeds together, between the moment the last seed passed warm_steps
    and the moment the first one logged its last test (each seed's t_env interpolated between its tests)."""
    if any(lane[-1][1] < warm_steps for lane in tests.values()):
        raise SystemExit(f"a seed logged no test at or after {warm_steps} steps; raise --t-max")
    begin = max(next(s for s, t in lane if t >= warm_steps) for lane in tests.values())
    end = min(lane[-1][0] for lane in tests.values())
    if end - begin <= 0:
        raise SystemExit(f"the seeds' steady windows after {warm_steps} steps do not overlap; raise --t-max")
    steps = 0.0
    for lane in tests.values():
        seconds, t_env = zip(*lane)
        steps += np.interp(end, seconds, t_env) - np.interp(begin, seconds, t_env)
    return steps / (end - begin)


def train_beside_python(repeats: int = 3) -> None:
    """Print the seconds of one QMIX training step on 1 thread (128 episodes of 60 steps, corridor's sizes:
    bench_train_step's learner) alone, and while another thread of the process runs Python without pause
    (what a lane collecting on the simulator does), at Python's default switch interval and at 0.5 ms."""
    import threading

    import torch as th

    import bench_train_step

    th.set_num_threads(1)
    batch = bench_train_step.random_batch(128, 60)
    learner = bench_train_step.make_learner("fused", batch)

    def step_seconds() -> float:
        start = time.perf_counter()
        learner.train(batch, 0, 0)
        return time.perf_counter() - start

    def beside_python(switch_interval: float) -> float:
        default, done = sys.getswitchinterval(), threading.Event()

        def run_python() -> None:
            while not done.is_set():
                sum(i * i for i in range(1000))

        sys.setswitchinterval(switch_interval)
        spinner = threading.Thread(target=run_python)
        spinner.start()
        try:
            return min(step_seconds() for _ in range(repeats))
        finally:
            done.set()
            spinner.join()
            sys.setswitchinterval(default)

    step_seconds()
    alone = min(step_seconds() for _ in range(repeats))
    default = sys.getswitchinterval()
    print(f"training step alone {alone:.2f} s; beside a thread running Python {beside_python(default):.2f} s "
          f"(switch interval {default * 1e3:g} ms), {beside_python(0.0005):.2f} s (0.5 ms)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=sorted(SEED_WORKLOADS) + ["gil"],
                        help="gil: a training step alone and beside a thread running Python (no main.py run)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 4], help="seed counts to run (1: the single run)")
    parser.add_argument("--t-max", type=int, default=60000, help="env steps of each seed")
    parser.add_argument("--warm-steps", type=int, default=20000, help="steady rate counted from this t_env")
    parser.add_argument("overrides", nargs="*", help="extra `with` overrides for every run")
    args = parser.parse_intermixed_args(argv)
    print(f"command: python bench/bench_seeds.py {args.workload} --seeds {' '.join(map(str, args.seeds))} "
          f"--t-max {args.t_max} --warm-steps {args.warm_steps} {' '.join(args.overrides)}".rstrip())
    print(f"machine: {describe_machine()}")
    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}")
    if args.workload == "gil":
        train_beside_python()
        return
    rates = {}
    for count in args.seeds:
        seeds = "seed=1" if count == 1 else f"seeds=[{','.join(str(s) for s in range(1, count + 1))}]"
        with tempfile.TemporaryDirectory() as results:
            result = run_seeds(SEED_WORKLOADS[args.workload] + [seeds, f"t_max={args.t_max}",
                                                               f"local_results_path={results}", *args.overrides])
        rates[count] = steady_total_rate(result["tests"], args.warm_steps)
        ratio = f", {rates[count] / rates[1]:.2f}x the single run" if 1 in rates and count != 1 else ""
        print(f"S={count}: steady {rates[count]:.0f} env steps/s of all seeds{ratio}; overall "
              f"{count * args.t_max / result['seconds']:.0f} env steps/s ({result['seconds']:.0f} s); peak memory "
              f"of the process tree {result['peak'] / 1e9:.2f} GB", flush=True)


if __name__ == "__main__":
    main()
