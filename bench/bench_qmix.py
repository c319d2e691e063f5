"""End-to-end QMIX throughput: env steps per second of `src/main.py` with algs/qmix.yaml.

Usage (from the repository root):
    python bench/bench_qmix.py [--maps 3m corridor] [--steps 20000 60000]

For each map, main.py runs twice with PyMARL2's qmix.yaml unchanged (8 parallel envs, batch 128,
tests every test_interval) for the two t_max values. "overall" is the longer run's env steps
over its wall-clock, start-up included; "marginal" is (t_long - t_short) / (time_long -
time_short), the rate once start-up, buffer filling and the first tests are paid for.
"""
import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import time

from machine_info import describe_machine  # bench/ is on sys.path when a benchmark runs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAIN = os.path.join(REPO, "src", "main.py")


def timed_run(map_name: str, t_max: int, results: str) -> float:
    """Wall-clock seconds of one main.py training run to t_max env steps (it stops within one
    batch of episodes past t_max, which the step counts below neglect)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, MAIN, "--config=qmix", "--env-config=sc2", "with",
                    f"env_args.map_name={map_name}", f"t_max={t_max}", f"local_results_path={results}"],
                   cwd=REPO, check=True, capture_output=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--maps", nargs="+", default=["3m", "corridor"])
    parser.add_argument("--steps", nargs=2, type=int, default=[20000, 60000], metavar=("SHORT", "LONG"))
    args = parser.parse_args(argv)
    short, long = sorted(args.steps)
    print(f"command: python bench/bench_qmix.py --maps {' '.join(args.maps)} --steps {short} {long}")
    print(f"machine: {describe_machine()}")
    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}")
    print(f"{'map':<12}{'t_max':>9}{'seconds':>9}{'overall steps/s':>17}{'marginal steps/s':>18}")
    for map_name in args.maps:
        with tempfile.TemporaryDirectory() as results:
            s_short = timed_run(map_name, short, results)
            s_long = timed_run(map_name, long, results)
        marginal = (long - short) / (s_long - s_short)
        print(f"{map_name:<12}{long:>9}{s_long:>9.1f}{long / s_long:>17.1f}{marginal:>18.1f}")


if __name__ == "__main__":
    main()
