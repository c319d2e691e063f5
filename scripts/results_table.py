"""Print a markdown results table of sacred runs: env, kind, env steps, wall-clock, test results.

Usage (from the repository root):
    python scripts/results_table.py results/sacred/3m                                  # every run of a map
    python scripts/results_table.py results/sacred/3m/qmix_env=8_adam_td_lambda/1 [RUN_DIR ...]

Each path is a sacred run folder (config.json, run.json, info.json) or a folder above run folders.
A running or killed run is read up to its last heartbeat. The test metric is the win rate
(test_battle_won_mean) where the env logs one, else the return (test_return_mean); "final" is the
mean of its last 5 values, "steps to" the first t_env it reached THRESHOLD (win rates only).
Evaluation runs (run_kind evaluate, under <name>/eval/) show the one test they ran.
"""
import argparse
import datetime
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

from utils.run_index import read_json, run_folders, run_kind  # noqa: E402

THRESHOLD = 0.9
FINAL_TESTS = 5
METRICS = ("test_battle_won_mean", "test_return_mean")  # the first one a run logged is shown


def wall_clock(run: dict) -> str:
    """Minutes from the run's start to its stop (or last heartbeat, while it runs)."""
    start = datetime.datetime.fromisoformat(run["start_time"])
    end = datetime.datetime.fromisoformat(run.get("stop_time") or run.get("heartbeat") or run["start_time"])
    return f"{(end - start).total_seconds() / 60:.1f} min"


def first_reaching(values: list, steps: list, threshold: float) -> str:
    hits = [t for t, v in zip(steps, values) if v >= threshold]
    return f"{hits[0]:,}" if hits else "not reached"


def row(run_dir: str) -> str:
    config, run, info = (read_json(os.path.join(run_dir, name)) for name in ("config.json", "run.json", "info.json"))
    env_args = config.get("env_args", {})
    where = " | ".join([env_args.get("map_name") or config["env"], env_args.get("backend", "-"),
                        config.get("train_precision", "float32")])
    head = f"| {run_dir} | {run_kind(config)} | {where}"
    metric = next((name for name in METRICS if info.get(name)), None)
    if metric is None:
        return f"{head} | - | {wall_clock(run)} | no test finished yet | | | | {run['status'].lower()} |"
    values, steps = info[metric], info[f"{metric}_T"]
    final = sum(values[-FINAL_TESTS:]) / len(values[-FINAL_TESTS:])
    reached = first_reaching(values, steps, THRESHOLD) if metric == "test_battle_won_mean" else "-"
    return (f"{head} | {steps[-1]:,} | {wall_clock(run)} | {metric} | {final:.2f} | {max(values):.2f} | {reached} | "
            f"{run['status'].lower()} |")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", help="sacred run folders, or folders above them")
    args = parser.parse_args(argv)
    try:
        folders = run_folders(args.paths)
    except FileNotFoundError as error:
        print(f"results_table.py: error: {error}", file=sys.stderr)
        return 1
    if not folders:
        print(f"results_table.py: error: no sacred run folder (config.json, run.json, info.json) under "
              f"{', '.join(args.paths)}", file=sys.stderr)
        return 1
    print(f"| run | kind | map or env | engine | precision | env steps | wall-clock | test metric | "
          f"final (last {FINAL_TESTS}) | best | steps to {THRESHOLD} | status |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for folder in folders:
        print(row(folder))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
