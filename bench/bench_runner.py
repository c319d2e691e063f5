"""Collection throughput of the parallel runner: envs stepped in the main process vs in worker processes.

Usage (from the repository root):
    python bench/bench_runner.py [--cases null:corridor sc2:3m sc2:corridor] [--runs 6]
                                 [--batch-size-run 8] [--seed 0] [--threads N] [--acting-threads 1 2]

Each case is ENV_CONFIG:MAP (src/config/envs/<ENV_CONFIG>.yaml; SMAC maps play on the built-in
simulator). The runner is the one main.py builds from algs/qmix.yaml, with the real n_mac at
epsilon 1 (annealed over 10^12 steps: random available actions). Both modes run side by side and
take turns, one episode batch (runner.run) at a time, so that a load from other processes hits
them alike; the ratio column compares them within this one run. "runner steps/s" counts steps of
all envs together (one act + step + store); "env steps/s" counts each env's steps, as t_env does.
The last table times mac.select_actions alone with each torch thread count of --acting-threads.
"""
import argparse
import datetime
import logging
import os
import sys
import time
from types import SimpleNamespace

import torch as th

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

from components.episode_buffer import EpisodeBatch  # noqa: E402  (needs src/ on sys.path)
from controllers import REGISTRY as mac_REGISTRY  # noqa: E402
from main import build_config  # noqa: E402
from run.run import build_scheme  # noqa: E402
from runners.parallel_runner import ParallelRunner  # noqa: E402
from utils.logging import Logger  # noqa: E402
from utils.threads import torch_threads  # noqa: E402
from machine_info import describe_machine  # noqa: E402

DEFAULT_CASES = ("null:corridor", "sc2:3m", "sc2:corridor")
MODES = ("main", "workers")


def runner_args(case: str, mode: str, batch_size_run: int, seed: int) -> SimpleNamespace:
    """main.py's merged config for qmix on `case`, epsilon held at 1, envs stepped as `mode` says."""
    env_config, map_name = case.split(":")
    config = build_config(["--config=qmix", f"--env-config={env_config}"])
    env_args = dict(config["env_args"], map_name=map_name, seed=seed)
    if env_config == "sc2":
        env_args["backend"] = "builtin"
    config.update(env_args=env_args, batch_size_run=batch_size_run, env_processes=mode, device="cpu",
                  epsilon_start=1.0, epsilon_anneal_time=10 ** 12)
    return SimpleNamespace(**config)


def build_runner(args: SimpleNamespace) -> ParallelRunner:
    """A parallel runner with the qmix controller, as run.setup_learning wires them (without a buffer)."""
    console = logging.getLogger("bench_runner")
    runner = ParallelRunner(args, Logger(console))
    env_info = runner.get_env_info()
    for key in ("n_agents", "n_actions", "state_shape", "obs_shape", "episode_limit"):
        setattr(args, key, env_info[key])
    scheme, groups, preprocess = build_scheme(env_info)
    mac_scheme = EpisodeBatch(scheme, groups, 1, 1, preprocess=preprocess).scheme  # with preprocess outputs
    runner.setup(scheme, groups, preprocess, mac_REGISTRY[args.mac](mac_scheme, groups, args))
    return runner


def timed_run(runner: ParallelRunner) -> tuple[int, int, float]:
    """(runner steps, env steps, seconds) of one runner.run()."""
    start = time.perf_counter()
    with th.no_grad():
        batch = runner.run(test_mode=False)
    seconds = time.perf_counter() - start
    env_steps = int(batch["filled"].sum()) - batch.batch_size  # filled = steps + 1 per episode
    return batch.max_t_filled() - 1, env_steps, seconds


def bench_case(case: str, runs: int, batch_size_run: int, seed: int,
               acting_threads: list[int]) -> tuple[dict[str, list[float]], dict[int, float]]:
    """Totals (runner steps, env steps, seconds) per mode over `runs` timed runs after one warm-up
    run, and the ms per mac.select_actions call for each count in `acting_threads`."""
    runners = {mode: build_runner(runner_args(case, mode, batch_size_run, seed)) for mode in MODES}
    totals = {mode: [0, 0, 0.0] for mode in MODES}
    acting_ms = {threads: 0.0 for threads in acting_threads}
    try:
        for mode in MODES:
            timed_run(runners[mode])
        for _ in range(runs):
            for mode in MODES:
                for k, value in enumerate(timed_run(runners[mode])):
                    totals[mode][k] += value
            for threads in acting_threads:
                acting_ms[threads] += timed_acting(runners["main"], threads) / runs
    finally:
        for runner in runners.values():
            runner.close_env()
    return totals, acting_ms


def timed_acting(runner: ParallelRunner, threads: int) -> float:
    """ms per mac.select_actions call (all envs, the agent network and epsilon-greedy) with `threads`
    torch threads, replaying the steps of the runner's last batch that all its episodes reached."""
    with torch_threads(threads):
        steps = int(runner.batch["filled"].sum(dim=1).min())
        runner.mac.init_hidden(batch_size=runner.batch_size)
        start = time.perf_counter()
        with th.no_grad():
            for t in range(steps):
                runner.mac.select_actions(runner.batch, t_ep=t, t_env=runner.t_env, bs=list(range(runner.batch_size)))
        seconds = time.perf_counter() - start
    return 1e3 * seconds / steps


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(DEFAULT_CASES), help="ENV_CONFIG:MAP")
    parser.add_argument("--runs", type=int, default=6, help="timed episode batches per mode and case")
    parser.add_argument("--batch-size-run", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=th.get_num_threads(),
                        help="torch threads of the main process outside runner.run (it acts with 1)")
    parser.add_argument("--acting-threads", type=int, nargs="*", default=[1, 2],
                        help="also time mac.select_actions alone with these torch thread counts")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.batch_size_run < 1:
        parser.error("--runs and --batch-size-run must be positive")
    th.set_num_threads(args.threads)
    print(f"command: python bench/bench_runner.py --cases {' '.join(args.cases)} --runs {args.runs} "
          f"--batch-size-run {args.batch_size_run} --seed {args.seed} --threads {args.threads} "
          f"--acting-threads {' '.join(map(str, args.acting_threads))}")
    print(f"machine: {describe_machine()}, torch {th.__version__}")
    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}, "
          f"load average at start {os.getloadavg()[0]:.2f}")
    print(f"{'case':<15}{'mode':<9}{'env steps':>10}{'seconds':>9}{'runner steps/s':>16}"
          f"{'env steps/s':>13}{'ms/runner step':>16}{'vs workers':>12}")
    acting = {}
    for case in args.cases:
        totals, acting[case] = bench_case(case, args.runs, args.batch_size_run, args.seed, args.acting_threads)
        workers_rate = totals["workers"][1] / totals["workers"][2]
        for mode in MODES:
            runner_steps, env_steps, seconds = totals[mode]
            print(f"{case:<15}{mode:<9}{env_steps:>10}{seconds:>9.2f}{runner_steps / seconds:>16.1f}"
                  f"{env_steps / seconds:>13.1f}{1e3 * seconds / runner_steps:>16.3f}"
                  f"{env_steps / seconds / workers_rate:>11.2f}x")
    if args.acting_threads:
        print("mac.select_actions alone, ms per call, by torch threads:")
        for case, ms in acting.items():
            print(f"{case:<15}" + "".join(f"{threads:>4} thread(s) {value:7.3f}" for threads, value in ms.items()))
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
