"""Environment throughput of the built-in SMAC simulator, one process, random available actions.

Usage (from the repository root):
    python bench/bench_env.py [--maps 3m corridor 27m_vs_30m] [--steps 2000] [--seed 0]

Each step does what PyMARL2's episode runner asks of the env: get_state, get_avail_actions and
get_obs, then step. "runner steps/s" times all of it; "step() only" times env.step alone.
Episodes that end are reset (reset time counts towards runner steps/s).
"""
import argparse
import datetime
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

from envs.starcraft.starcraft2 import StarCraft2Env  # noqa: E402  (needs src/ on sys.path)

DEFAULT_MAPS = ("3m", "corridor", "27m_vs_30m")


def random_actions(env: StarCraft2Env, rng: np.random.Generator) -> list[int]:
    """One uniformly random available action per agent."""
    avail = np.asarray(env.get_avail_actions())  # [n_agents, n_actions]
    return [int(rng.choice(np.flatnonzero(row))) for row in avail]


def bench_map(map_name: str, steps: int, seed: int) -> dict[str, float]:
    """Run `steps` env steps on one map; returns the counts and both throughputs."""
    env = StarCraft2Env(map_name=map_name, seed=seed)
    rng = np.random.default_rng(seed)
    env.reset()
    episodes, step_seconds = 0, 0.0
    start = time.perf_counter()
    for _ in range(steps):
        env.get_state()
        env.get_obs()
        actions = random_actions(env, rng)
        step_start = time.perf_counter()
        _, terminated, _ = env.step(actions)
        step_seconds += time.perf_counter() - step_start
        if terminated:
            episodes += 1
            env.reset()
    total_seconds = time.perf_counter() - start
    env.close()
    return {"episodes": episodes, "seconds": total_seconds,
            "runner_sps": steps / total_seconds, "step_sps": steps / step_seconds}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--maps", nargs="+", default=list(DEFAULT_MAPS))
    parser.add_argument("--steps", type=int, default=2000, help="env steps per map")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be positive, got {args.steps}")

    print(f"command: python bench/bench_env.py --maps {' '.join(args.maps)} "
          f"--steps {args.steps} --seed {args.seed}")
    print(f"machine: {platform.platform()}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}")
    print(f"{'map':<14}{'steps':>7}{'episodes':>10}{'seconds':>9}"
          f"{'runner steps/s':>16}{'step() only':>13}")
    for map_name in args.maps:
        result = bench_map(map_name, args.steps, args.seed)
        print(f"{map_name:<14}{args.steps:>7}{result['episodes']:>10}{result['seconds']:>9.2f}"
              f"{result['runner_sps']:>16.1f}{result['step_sps']:>13.1f}")


if __name__ == "__main__":
    main()
