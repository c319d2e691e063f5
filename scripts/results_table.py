"""Print a markdown results table of sacred runs: map, env steps, wall-clock, test win rates.

Usage (from the repository root):
    python scripts/results_table.py results/sacred/3m/qmix_env=8_adam_td_lambda/1 [RUN_DIR ...]

Each RUN_DIR is a sacred run folder (config.json, run.json, info.json). A running or killed run
is read up to its last heartbeat. "final" is the mean of the last 5 test win rates.
"""
import argparse
import datetime
import json
import os
import sys

THRESHOLD = 0.9
FINAL_TESTS = 5


def read(run_dir: str, name: str) -> dict:
    with open(os.path.join(run_dir, name)) as f:
        return json.load(f)


def wall_clock(run: dict) -> str:
    """Minutes from the run's start to its stop (or last heartbeat, while it runs)."""
    start = datetime.datetime.fromisoformat(run["start_time"])
    end = datetime.datetime.fromisoformat(run.get("stop_time") or run["heartbeat"])
    return f"{(end - start).total_seconds() / 60:.1f} min"


def first_reaching(values: list, steps: list, threshold: float) -> str:
    hits = [t for t, v in zip(steps, values) if v >= threshold]
    return f"{hits[0]:,}" if hits else "not reached"


def row(run_dir: str) -> str:
    config, run, info = (read(run_dir, name) for name in ("config.json", "run.json", "info.json"))
    if "test_battle_won_mean" not in info:
        raise SystemExit(f"{run_dir}: info.json has no test_battle_won_mean yet (no test run finished)")
    wins, steps = info["test_battle_won_mean"], info["test_battle_won_mean_T"]
    final = sum(wins[-FINAL_TESTS:]) / len(wins[-FINAL_TESTS:])
    return (f"| {config['env_args']['map_name']} | {config['env_args']['backend']} | {steps[-1]:,} | "
            f"{wall_clock(run)} | {final:.2f} | {max(wins):.2f} | "
            f"{first_reaching(wins, steps, THRESHOLD)} | {run['status'].lower()} |")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", nargs="+", help="sacred run folders")
    args = parser.parse_args(argv)
    print(f"| map | engine | env steps | wall-clock | final test win rate (last {FINAL_TESTS}) | "
          f"best | steps to {THRESHOLD} | status |")
    print("|---|---|---|---|---|---|---|---|")
    for run_dir in args.run_dirs:
        print(row(run_dir))


if __name__ == "__main__":
    main(sys.argv[1:])
