"""Where the time of a training run goes: `src/main.py` under cProfile, summed by stage.

Usage (from the repository root):
    python bench/profile_e2e.py [--t-max 60000] [--repo PATH] [--top 15] [-- main.py arguments]
    e.g. python bench/profile_e2e.py -- --config=qmix --env-config=sc2 with env_args.map_name=3m

Runs main.py (default: algs/qmix.yaml on the zero-cost null env with corridor's shapes) in a
subprocess under cProfile, then prints the main process's wall-clock split into the training
loop's stages (collecting episodes, storing them, sampling, the training step, test episodes)
and the functions of the repository with the most time of their own. Env workers are other
processes: with the parallel runner their stepping shows as the main process waiting on Pipes.
"""
import argparse
import datetime
import os
import pstats
import subprocess
import sys
import tempfile

from bench_e2e import REPO, WORKLOADS  # bench/ is on sys.path when this script runs
from machine_info import describe_machine

DEFAULT_ARGS = WORKLOADS["null"]  # bench_e2e's null workload: qmix on the null env with corridor's shapes
# (label, file suffix, function name): the stages of TrainingLoop.iterate and what they call.
STAGES = [
    ("whole run (sacred entry, set-up included)", "run/run.py", "run"),
    ("  collect (runner.run + insert)", "run/run.py", "collect"),
    ("    insert into the replay buffer", "components/episode_buffer.py", "insert_episode_batch"),
    ("  learn (sample + train)", "run/run.py", "learn"),
    ("    sample from the replay buffer", "components/episode_buffer.py", "sample"),
    ("    learner.train", "learners/q_learner.py", "train"),
    ("  test episodes", "run/run.py", "test"),
]


def cumulative(stats: pstats.Stats, suffix: str, name: str) -> float:
    """Cumulative seconds of the function `name` defined in a file ending with `suffix` (0 if absent)."""
    total = 0.0
    for (filename, _line, func), (_cc, _nc, _tt, ct, _callers) in stats.stats.items():
        if func == name and filename.endswith(suffix):
            total = max(total, ct)
    return total


def own_time_by_function(stats: pstats.Stats, src: str | None, top: int) -> list:
    """The `top` functions (under `src` only, unless None) with most time of their own (callees excluded);
    torch's operators appear as built-in methods."""
    rows = [(tt, f"{os.path.relpath(filename, src) if src else os.path.basename(filename)}:{func}")
            for (filename, _line, func), (_cc, _nc, tt, _ct, _c) in stats.stats.items()
            if src is None or filename.startswith(src)]
    return sorted(rows, reverse=True)[:top]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--t-max", type=int, default=60000)
    parser.add_argument("--repo", default=REPO, help="checkout whose src/main.py runs (default: this one)")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("main_args", nargs="*", help="main.py arguments (after --); default: qmix on null corridor")
    args = parser.parse_args(argv)
    repo = os.path.abspath(args.repo)
    main_args = args.main_args or DEFAULT_ARGS
    print(f"command: python bench/profile_e2e.py --t-max {args.t_max}"
          f"{'' if args.repo == REPO else ' --repo ' + args.repo} --top {args.top} -- {' '.join(main_args)}")
    print(f"machine: {describe_machine()}; "
          f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}")
    with tempfile.TemporaryDirectory() as results:
        profile = os.path.join(results, "main.prof")
        run_args = main_args + ([] if "with" in main_args else ["with"]) + [
            f"t_max={args.t_max}", f"local_results_path={results}"]
        subprocess.run([sys.executable, "-m", "cProfile", "-o", profile, os.path.join(repo, "src", "main.py"),
                        *run_args], cwd=repo, check=True, capture_output=True)
        stats = pstats.Stats(profile)
    loop = cumulative(stats, "run/run.py", "run") or 1.0
    print(f"{'stage':<38}{'seconds':>9}{'share':>8}")
    for label, suffix, name in STAGES:
        seconds = cumulative(stats, suffix, name)
        print(f"{label:<38}{seconds:>9.2f}{seconds / loop:>8.1%}")
    for title, src in (("repository functions", os.path.join(repo, "src")), ("all functions", None)):
        print(f"\n{title} with the most own time (of {loop:.1f} s in the run):")
        for seconds, where in own_time_by_function(stats, src, args.top):
            print(f"  {seconds:>7.2f} s  {where}")


if __name__ == "__main__":
    main()
