"""Seconds per training step of each value-based algorithm, against QMIX's in the same run.

Usage (from the repository root):
    python bench/bench_algorithms.py [--episodes 128] [--steps 100] [--repeats 5] [--warmup 1] [--threads 2]
                                     [--algs qmix vdn qatten qplex ow_qmix cw_qmix qtran qmix_att qmix_conv]

One learner per algorithm, built from main.py's merged config for algs/<alg>.yaml (PyMARL2's values,
float32, the fused unroll where the agent is a GRU agent) on SMAC corridor's sizes (6 agents, 30
actions, obs 156, state 282; the null env's), all trained on the same random EpisodeBatch
(bench_train_step.random_batch). Each timing round runs one train call of every algorithm in turn,
so load from other processes hits them alike; the figures are medians over the rounds after the
warm-up. Beside each time: its ratio to QMIX's and the trained parameters (agent, mixer and any
central networks), which say how much larger an algorithm's networks are.
"""
import argparse
import datetime
import statistics
import time
from types import SimpleNamespace

import torch as th

from bench_train_step import CORRIDOR, QuietLogger, random_batch

from controllers import REGISTRY as mac_REGISTRY  # noqa: E402  (bench_train_step puts src/ on sys.path)
from learners import REGISTRY as le_REGISTRY  # noqa: E402
from main import build_config  # noqa: E402
from machine_info import describe_machine  # noqa: E402

ALGS = ["qmix", "vdn", "qatten", "qplex", "ow_qmix", "cw_qmix", "qtran", "qmix_att", "qmix_conv"]


def make_learner(alg: str, batch, seed: int = 0):
    config = build_config([f"--config={alg}", "--env-config=null"])
    config.update(CORRIDOR, episode_limit=batch.max_seq_length - 1, device="cpu", use_cuda=False,
                  learner_log_interval=10 ** 9)
    args = SimpleNamespace(**config)
    if args.agent_own_state_size is True:  # Qatten: corridor's ally features (health, cooldown, x, y, shield, type)
        args.agent_own_state_size = 5
    th.manual_seed(seed)
    mac = mac_REGISTRY[args.mac](batch.scheme, batch.groups, args)
    return le_REGISTRY[args.learner](mac, batch.scheme, QuietLogger(), args)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=128)
    parser.add_argument("--steps", type=int, default=100, help="transitions per episode (T = steps + 1)")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds after the warm-up")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--algs", nargs="+", default=ALGS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if "qmix" not in args.algs:
        args.algs = ["qmix", *args.algs]
    print(f"command: python bench/bench_algorithms.py --episodes {args.episodes} --steps {args.steps} "
          f"--repeats {args.repeats} --warmup {args.warmup} --threads {args.threads} --algs {' '.join(args.algs)}")
    print(f"machine: {describe_machine()}, torch {th.__version__}")
    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}")
    th.set_num_threads(args.threads)
    batch = random_batch(args.episodes, args.steps)
    learners = {alg: make_learner(alg, batch) for alg in args.algs}
    seconds = {alg: [] for alg in args.algs}
    for round_ in range(args.warmup + args.repeats):
        for alg, learner in learners.items():
            start = time.perf_counter()
            learner.train(batch, t_env=0, episode_num=0)
            if round_ >= args.warmup:
                seconds[alg].append(time.perf_counter() - start)
    medians = {alg: statistics.median(times) for alg, times in seconds.items()}
    print(f"\nwall-clock seconds per train step, median of {args.repeats} (batch {args.episodes} x {args.steps + 1} "
          f"steps, {args.threads} thread(s))")
    print(f"{'config':<12}{'learner':<22}{'seconds':>9}{'x qmix':>8}{'parameters':>12}")
    for alg, learner in learners.items():
        parameters = sum(p.numel() for p in learner.params)
        print(f"{alg:<12}{learner.args.learner:<22}{medians[alg]:>9.3f}{medians[alg] / medians['qmix']:>7.2f}x"
              f"{parameters:>12,}")


if __name__ == "__main__":
    main()
