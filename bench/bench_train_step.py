"""Seconds per NQLearner.train step: step-wise vs fused unroll, float32 vs bfloat16, 2 vs 1 threads.

Usage (from the repository root):
    python bench/bench_train_step.py [--episodes 128] [--steps 100] [--repeats 5] [--warmup 2]
                                     [--threads 2 1] [--variants stepwise fused fused-bf16]

One learner per variant, built from main.py's merged config for algs/qmix.yaml (n_rnn agent, QMIX
mixer, Adam lr 0.001, TD(lambda) 0.6) and SMAC corridor's sizes (the null env's: 6 agents, 30
actions, obs 156, state 282), all starting from the same weights and trained on the same random
EpisodeBatch (scheme of run.build_scheme).
Each timing round runs one train call of every variant and thread count in turn, so load from
other processes hits them alike; the figures are medians over the rounds after the warm-up, in
wall-clock and in CPU seconds (less sensitive to other processes; with 2 threads it counts both).
The losses of the first step (same weights, same batch) show what the unroll and the precision
alone change; those after all the steps show how far the variants drift apart while training. Each
variant is compared with its float32 counterpart (same unroll), and a float32 fused one with stepwise.
The process keeps freed memory as training does (utils.allocator).
"""
import argparse
import datetime
import os
import statistics
import sys
import time
from types import SimpleNamespace

import torch as th

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

from components.episode_buffer import EpisodeBatch  # noqa: E402
from controllers import REGISTRY as mac_REGISTRY  # noqa: E402
from envs.null_env import NullEnv  # noqa: E402
from learners import REGISTRY as le_REGISTRY  # noqa: E402
from main import build_config  # noqa: E402
from run.run import build_scheme  # noqa: E402
from utils.allocator import keep_freed_memory  # noqa: E402
from machine_info import describe_machine  # noqa: E402


def corridor_sizes() -> dict:
    """SMAC corridor's agent, action, observation and state sizes, as the null env gives them (the
    episode_limit is the benchmark's own --steps)."""
    info = NullEnv(map_name="corridor").get_env_info()
    return {key: info[key] for key in ("n_agents", "n_actions", "obs_shape", "state_shape")}


CORRIDOR = corridor_sizes()
VARIANTS = {  # name -> (train_unroll, train_precision)
    "stepwise": ("stepwise", "float32"),
    "fused": ("fused", "float32"),
    "fused-bf16": ("fused", "bfloat16"),
    "stepwise-bf16": ("stepwise", "bfloat16"),
}
DEFAULT_VARIANTS = ["stepwise", "fused", "fused-bf16"]


class QuietLogger:
    """Keeps the learner's last logged stats; no console."""

    def __init__(self):
        self.stats = {}
        self.console_logger = SimpleNamespace(info=lambda message: None)

    def log_stat(self, key: str, value: float, t: int, to_sacred: bool = True) -> None:
        self.stats[key] = value


def qmix_args(episode_limit: int, train_unroll: str, train_precision: str) -> SimpleNamespace:
    """main.py's merged config for qmix on the null env (the settings a run trains with) on corridor's
    sizes, on the CPU, logging every train call's stats (learner_log_interval 0) for the loss report."""
    config = build_config(["--config=qmix", "--env-config=null"])
    config.update(CORRIDOR, episode_limit=episode_limit, device="cpu", use_cuda=False, learner_log_interval=0,
                  train_unroll=train_unroll, train_precision=train_precision)
    return SimpleNamespace(**config)


def random_batch(episodes: int, steps: int, seed: int = 0) -> EpisodeBatch:
    """Full-length episodes with random fields; every other one terminates at its last step."""
    gen = th.Generator().manual_seed(seed)
    n_agents, n_actions = CORRIDOR["n_agents"], CORRIDOR["n_actions"]
    scheme, groups, preprocess = build_scheme(dict(CORRIDOR, episode_limit=steps))
    batch = EpisodeBatch(scheme, groups, episodes, steps + 1, preprocess=preprocess)
    avail = th.rand(episodes, steps + 1, n_agents, n_actions, generator=gen) < 0.5  # [bs, T, n_agents, n_actions]
    avail[..., 0] = True  # no-op always available
    terminated = th.zeros(episodes, steps + 1, 1)  # [bs, T, 1]
    terminated[::2, steps - 1] = 1
    batch.update({"state": th.randn(episodes, steps + 1, CORRIDOR["state_shape"], generator=gen),
                  "obs": th.randn(episodes, steps + 1, n_agents, CORRIDOR["obs_shape"], generator=gen),
                  "actions": th.randint(0, n_actions, (episodes, steps + 1, n_agents, 1), generator=gen),
                  "avail_actions": avail, "reward": th.rand(episodes, steps + 1, 1, generator=gen),
                  "terminated": terminated})
    return batch


def make_learner(variant: str, batch: EpisodeBatch, seed: int = 0):
    args = qmix_args(batch.max_seq_length - 1, *VARIANTS[variant])
    th.manual_seed(seed)
    mac = mac_REGISTRY[args.mac](batch.scheme, batch.groups, args)
    return le_REGISTRY[args.learner](mac, batch.scheme, QuietLogger(), args)


def timed_step(learner, batch: EpisodeBatch, threads: int) -> tuple[float, float]:
    """(wall-clock, CPU) seconds of one train call with `threads` torch threads."""
    th.set_num_threads(threads)
    wall, cpu = time.perf_counter(), time.process_time()
    learner.train(batch, t_env=0, episode_num=0)
    return time.perf_counter() - wall, time.process_time() - cpu


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=128)
    parser.add_argument("--steps", type=int, default=100, help="transitions per episode (T = steps + 1)")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds after the warm-up")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    parser.add_argument("--variants", nargs="+", default=DEFAULT_VARIANTS, choices=list(VARIANTS))
    return parser.parse_args(argv)


def time_rounds(learners: dict, batch: EpisodeBatch, args: argparse.Namespace) -> dict:
    """(variant, threads) -> [(wall, CPU) seconds] of the rounds after the warm-up."""
    samples = {(variant, threads): [] for variant in learners for threads in args.threads}
    for round_ in range(args.warmup + args.repeats):
        for (variant, threads), timings in samples.items():
            timing = timed_step(learners[variant], batch, threads)
            if round_ >= args.warmup:
                timings.append(timing)
    return samples


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    print(f"command: python bench/bench_train_step.py --episodes {args.episodes} --steps {args.steps} "
          f"--repeats {args.repeats} --warmup {args.warmup} --threads {' '.join(map(str, args.threads))} "
          f"--variants {' '.join(args.variants)}")
    print(f"machine: {describe_machine()}, torch {th.__version__}")
    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}")
    print(f"glibc keeps freed memory: {keep_freed_memory()}")

    batch = random_batch(args.episodes, args.steps)
    learners = {variant: make_learner(variant, batch) for variant in args.variants}
    first = {}
    for variant, learner in learners.items():
        learner.train(batch, t_env=0, episode_num=0)
        first[variant] = dict(learner.logger.stats)
    samples = time_rounds(learners, batch, args)
    for column, what in ((0, "wall-clock"), (1, "CPU (all threads)")):
        medians = {key: statistics.median(timing[column] for timing in timings) for key, timings in samples.items()}
        report_times(medians, what, args)
    report_losses(first, "first step: same weights, same batch", args.variants)
    n_steps = 1 + (args.warmup + args.repeats) * len(args.threads)
    report_losses({variant: learner.logger.stats for variant, learner in learners.items()},
                  f"after {n_steps} steps on that batch", args.variants)


def report_times(medians: dict, what: str, args: argparse.Namespace) -> None:
    """Median seconds per step, speed-ups over stepwise and over the fewest threads."""
    print(f"\n{what} seconds per train step, median of {args.repeats} "
          f"(batch {args.episodes} x {args.steps + 1} steps)")
    print(f"{'variant':<14}" + "".join(f"{f'{threads} thread(s)':>14}" for threads in args.threads)
          + (f"   x stepwise ({', '.join(f'{threads}t' for threads in args.threads)})"
             if "stepwise" in args.variants else ""))
    for variant in args.variants:
        cells = "".join(f"{medians[variant, threads]:>14.3f}" for threads in args.threads)
        if "stepwise" in args.variants:
            cells += "   " + " ".join(f"{medians['stepwise', threads] / medians[variant, threads]:.2f}x"
                                      for threads in args.threads)
        print(f"{variant:<14}{cells}")
    if len(args.threads) > 1:
        low, high = min(args.threads), max(args.threads)
        print(f"{high} threads vs {low}: " + ", ".join(
            f"{variant} {medians[variant, low] / medians[variant, high]:.2f}x" for variant in args.variants))


def reference_variant(variant: str, variants: list) -> str:
    """What a variant's losses are compared with: its float32 counterpart, and for a float32 one stepwise."""
    unroll, precision = VARIANTS[variant]
    candidates = ([name for name, settings in VARIANTS.items() if settings == (unroll, "float32")]
                  if precision == "bfloat16" else ["stepwise"])
    return next((name for name in candidates if name in variants), variants[0])


def report_losses(stats: dict, when: str, variants: list) -> None:
    """Loss and gradient norm per variant, relative to its reference variant's."""
    print(f"\nloss_td and grad_norm, {when} (relative difference to the variant named in brackets)")
    for variant in variants:
        reference = reference_variant(variant, variants)
        cells = [f"{key} {stats[variant][key]:.6f} "
                 f"({abs(stats[variant][key] - stats[reference][key]) / abs(stats[reference][key]):.1e})"
                 for key in ("loss_td", "grad_norm")]
        print(f"{variant:<14}" + "   ".join(cells) + f"   [{reference}]")


if __name__ == "__main__":
    main()
