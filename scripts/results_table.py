"""Print a markdown results table of sacred runs: env, kind, env steps, wall-clock, test results.

Usage (from the repository root):
    python scripts/results_table.py results/sacred/3m                                  # every run of a map
    python scripts/results_table.py results/sacred/3m/qmix_env=8_adam_td_lambda/1 [RUN_DIR ...]
    python scripts/results_table.py docs/results/smacv2 --at 100000 200000 500000 1000000

Each path is a sacred run folder (config.json, run.json, info.json) or a folder above run folders.
A running or killed run is read up to its last heartbeat. The test metric is the win rate
(test_battle_won_mean) where the env logs one, else the return (test_return_mean, or the agents'
summed returns test_total_return_mean); "final" is the mean of its last 5 values, "steps to" the
first t_env it reached THRESHOLD (win rates only).
Evaluation runs (run_kind evaluate, under <name>/eval/) show the one test they ran.

--at STEP ... prints learning curves instead: one row per training run with its map, algorithm
(the config's name), seed, unique_token, the git commit(s) its run.json records and the built-in
simulator's source digest its cout.txt logged ('-' where that file is not kept), then the test
metric at each STEP: the test logged at the first t_env >= STEP ('-' if the run never got there).
Runs are told apart by what their config.json records (unique_token), not by folder names: a run
resumed into another sacred folder keeps its token, and its newest folder, which starts with the
curves of the folders before it, gives the values.

--at STEP ... --mean prints one row per map and algorithm instead (the run's name, less the
`_seed<seed>` that src/sweep.py adds): the mean over its seeds at each STEP, with each seed's value.
The runs of a row must differ in nothing but what identifies a run or where and on how many threads it
trains (PER_RUN_KEYS), and must have played the same simulator sources (where their kept cout.txt names
them): a row that would pool other settings is refused, naming the key. A key that a run recorded
before it existed lacks counts as default.yaml's value for it (see same_setting).
"""
import re
import argparse
import functools
import datetime
import os
import sys

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
sys.path.insert(0, SRC)

from utils.run_index import (SEED_BATCH_KEYS, first_at_or_after, flatten, read_json, run_folders, run_kind,  # noqa: E402
                             run_where, test_metric)

THRESHOLD = 0.9
FINAL_TESTS = 5
# Config keys that tell one run of a setting from another; --mean pools runs that differ only here.
PER_RUN_KEYS = ("seed", "env_args.seed", "env_seeds", "unique_token", "name", "local_results_path",
                "checkpoint_path", "resume", "label", *SEED_BATCH_KEYS,
                # where and on how many threads a run trains changes its float arithmetic (the order of
                # sums, a GPU's kernels and random streams), not its setting (src/plot.py's NOT_LEARNING says
                # the same): a seed batch's runs (1 thread) pool with a run alone (all cores), a GPU run with
                # a CPU run; the replay buffer's device only stores the episodes
                "learner_threads", "tune_learner_threads", "use_cuda", "buffer_cpu_only")
DIGEST_LINE = re.compile(r"sources sha256 ([0-9a-f]+)")  # run.py's engine log line in cout.txt


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
    where = " | ".join([run_where(config), env_args.get("backend", "-"),
                        config.get("train_precision", "float32")])
    head = f"| {run_dir} | {run_kind(config)} | {where}"
    metric = test_metric(info)
    if metric is None:
        return f"{head} | - | {wall_clock(run)} | no test finished yet | | | | {run['status'].lower()} |"
    values, steps = info[metric], info[f"{metric}_T"]
    final = sum(values[-FINAL_TESTS:]) / len(values[-FINAL_TESTS:])
    reached = first_reaching(values, steps, THRESHOLD) if metric == "test_battle_won_mean" else "-"
    return (f"{head} | {steps[-1]:,} | {wall_clock(run)} | {metric} | {final:.2f} | {max(values):.2f} | {reached} | "
            f"{run['status'].lower()} |")


def value_at(values: list, steps: list, step: int) -> str:
    """The value of the first test logged at t_env >= step, '-' if there is none."""
    value = first_at_or_after(values, steps, step)
    return "-" if value is None else f"{value:.2f}"


def commits(runs: list[dict]) -> str:
    """The git commits the run.json files of `runs` record (sacred's experiment.repositories), in
    order, '(dirty)' where the tree had uncommitted changes; '-' if none does."""
    found = []
    for run in runs:
        for repository in run.get("experiment", {}).get("repositories", []):
            label = repository["commit"][:7] + (" (dirty)" if repository.get("dirty") else "")
            if label not in found:
                found.append(label)
    return ", ".join(found) or "-"


def simulator_digests(folders: list[str]) -> str:
    """The built-in simulator digests the cout.txt of `folders` logged, in order; '-' if none."""
    found = []
    for folder in folders:
        path = os.path.join(folder, "cout.txt")
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                found += [digest for digest in DIGEST_LINE.findall(f.read()) if digest not in found]
    return ", ".join(found) or "-"


def training_runs(folders: list[str]) -> dict[str, list[str]]:
    """{unique_token: its folders, oldest start first} of the training runs among `folders` (a run
    without a recorded token stands alone, under its folder)."""
    runs: dict[str, list[tuple[str, str]]] = {}
    for folder in folders:
        config = read_json(os.path.join(folder, "config.json"))
        if run_kind(config) != "train":
            continue
        start = read_json(os.path.join(folder, "run.json"))["start_time"]
        runs.setdefault(config.get("unique_token") or folder, []).append((start, folder))
    return {token: [folder for _, folder in sorted(parts)] for token, parts in runs.items()}


def curve_row(token: str, folders: list[str], at: list[int]) -> tuple[tuple, str]:
    """(sort key, markdown row) of one training run for --at."""
    config, info = (read_json(os.path.join(folders[-1], name)) for name in ("config.json", "info.json"))
    runs = [read_json(os.path.join(folder, "run.json")) for folder in folders]
    where = run_where(config)
    metric = test_metric(info)
    cells = [value_at(info[metric], info[f"{metric}_T"], step) for step in at] if metric else ["-"] * len(at)
    last = f"{info[f'{metric}_T'][-1]:,}" if metric else "-"
    line = (f"| {where} | {config.get('name', '-')} | {config.get('seed', '-')} | {token} | {commits(runs)} | "
            f"{simulator_digests(folders)} | {metric or 'no test yet'} | {' | '.join(cells)} | {last} | "
            f"{runs[-1]['status'].lower()} |")
    return (str(where), str(config.get("name")), str(config.get("seed")), token), line


def print_curves(folders: list[str], at: list[int]) -> None:
    """The --at table: one row per training run (see the module docstring)."""
    print(f"| map or env | algorithm | seed | run (unique_token) | git commit | simulator sha256 | test metric | "
          f"{' | '.join(f't_env {step:,}' for step in at)} | last test | status |")
    print("|---" * (9 + len(at)) + "|")
    for _, line in sorted(curve_row(token, parts, at) for token, parts in training_runs(folders).items()):
        print(line)


def setting(config: dict) -> dict:
    """The run's config without PER_RUN_KEYS, flattened to dotted keys."""
    flat = flatten(config)
    return {key: value for key, value in flat.items() if key not in PER_RUN_KEYS}


@functools.cache
def default_config() -> dict:
    """src/config/default.yaml, flattened to dotted keys."""
    import yaml

    with open(os.path.join(SRC, "config", "default.yaml")) as f:
        return flatten(yaml.safe_load(f))


def same_setting(first: dict, other: dict, key: str) -> bool:
    """Whether two runs' settings agree on `key`. A key one of them lacks was added to marlkit after
    that run; it agrees when the other run has the value default.yaml gives it now (a new key's default
    keeps the behaviour of before, as marlkit's rule is), and never for a key default.yaml lacks."""
    if key in first and key in other:
        return first[key] == other[key]
    present = first if key in first else other
    defaults = default_config()
    return key in defaults and present[key] == defaults[key]


def check_one_setting(configs: list[dict], what: str) -> None:
    """ValueError naming the first key in which `configs` (of runs to pool as seeds) differ."""
    first = setting(configs[0])
    for config in configs[1:]:
        other = setting(config)
        differing = sorted(key for key in first.keys() | other.keys() if not same_setting(first, other, key))
        if differing:
            key = differing[0]
            raise ValueError(f"{what} differ in {key} ({first.get(key, 'absent')!r} "
                             f"against {other.get(key, 'absent')!r}): pass their folders separately")


def mean_row(group: list[tuple[dict, dict]], at: list[int]) -> list[str]:
    """The --mean cells of one map and algorithm: per STEP, the mean over the runs that got there
    and each run's value in seed order ('-' for one that did not)."""
    cells = []
    for step in at:
        values = [value_at(info[metric], info[f"{metric}_T"], step) if (metric := test_metric(info)) else "-"
                  for _, info in group]
        reached = [float(value) for value in values if value != "-"]
        mean = f"{sum(reached) / len(reached):.2f}" if reached else "-"
        cells.append(f"{mean} ({', '.join(values)})")
    return cells


def seed_groups(folders: list[str]) -> dict[tuple[str, str], list[tuple[dict, dict]]]:
    """{(map or env, algorithm): [(config, info) of each training run], in seed order}. The algorithm is
    the run's name less the `_seed<seed>` that src/sweep.py adds; a config gains "simulator sources",
    the digest its kept log names, so that the simulator a run played on counts as a setting."""
    groups: dict[tuple[str, str], list[tuple[dict, dict]]] = {}
    for parts in training_runs(folders).values():
        config, info = (read_json(os.path.join(parts[-1], name)) for name in ("config.json", "info.json"))
        algorithm = re.sub(rf"_seed{config.get('seed')}$", "", str(config.get("name")))
        config = {**config, "simulator sources": simulator_digests(parts)}
        groups.setdefault((run_where(config), algorithm), []).append((config, info))
    for group in groups.values():
        group.sort(key=lambda run: seed_order(run[0].get("seed")))
    return groups


def seed_order(seed) -> tuple:
    """Sort key of a run's seed: whole numbers in numeric order (2 before 10), then anything else as text."""
    return (0, seed, "") if isinstance(seed, int) and not isinstance(seed, bool) else (1, 0, str(seed))


def print_means(folders: list[str], at: list[int]) -> None:
    """The --at --mean table (see the module docstring); raises ValueError for a row that would
    pool runs of different settings."""
    rows = []
    for (where, name), group in sorted(seed_groups(folders).items()):
        check_one_setting([config for config, _ in group], f"the {name} runs on {where}")
        seeds = ", ".join(str(config.get("seed")) for config, _ in group)
        rows.append(f"| {where} | {name} | {seeds} | {' | '.join(mean_row(group, at))} |")
    print(f"| map or env | algorithm | seeds | {' | '.join(f'test at t_env {step:,}: mean (per seed)' for step in at)} |")
    print("|---" * (3 + len(at)) + "|")
    print("\n".join(rows))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", help="sacred run folders, or folders above them")
    parser.add_argument("--at", nargs="+", type=int, metavar="STEP",
                        help="learning curves: each training run's test metric at these env steps")
    parser.add_argument("--mean", action="store_true", help="with --at: one row per map and algorithm, "
                        "the mean over its seeds")
    parser.add_argument("--aggregate", action="store_true", help="IQM, mean, median and optimality gap per "
                        "algorithm over tasks, with 95%% bootstrap intervals (at each --at STEP, else final)")
    parser.add_argument("--improvement", nargs=2, action="append", metavar=("X", "Y"), default=[],
                        help="with --aggregate: the probability that algorithm X scores above Y (repeatable)")
    parser.add_argument("--absolute", action="store_true", help="with --aggregate: score each run by its "
                        "absolute-metric evaluation (evaluate=True absolute_metric=True), found among the folders")
    parser.add_argument("--figures", metavar="DIR", help="with --aggregate: write its figures (PNG) into DIR")
    parser.add_argument("--marl-eval", metavar="PATH", help="write the runs' tests in marl-eval's JSON layout")
    args = parser.parse_args(argv)
    if args.at and min(args.at) < 0:
        parser.error("--at takes env steps (non-negative integers)")
    if args.mean and not args.at:
        parser.error("--mean goes with --at STEP ...")
    aggregate = args.aggregate or args.marl_eval
    if (args.improvement or args.figures or args.absolute) and not args.aggregate:
        parser.error("--improvement, --figures and --absolute go with --aggregate")
    if args.absolute and args.at:
        parser.error("--absolute scores the absolute metric; --at scores the tests at steps: ask for one")
    if aggregate and args.mean:
        parser.error("--mean and --aggregate are two tables: ask for one")
    try:
        folders = run_folders(args.paths)
    except FileNotFoundError as error:
        print(f"results_table.py: error: {error}", file=sys.stderr)
        return 1
    if not folders:
        print(f"results_table.py: error: no sacred run folder (config.json, run.json, info.json) under "
              f"{', '.join(args.paths)}", file=sys.stderr)
        return 1
    if aggregate:
        import run_statistics

        try:
            steps = [run_statistics.ABSOLUTE] if args.absolute else args.at
            lines = run_statistics.report(folders, steps, [tuple(pair) for pair in args.improvement],
                                          args.figures, args.marl_eval, tables=args.aggregate)
        except (OSError, ValueError) as error:
            print(f"results_table.py: error: {error}", file=sys.stderr)
            return 1
        if lines:
            print("\n".join(lines))
        return 0
    if args.at and args.mean:
        try:
            print_means(folders, args.at)
        except ValueError as error:
            print(f"results_table.py: error: {error}", file=sys.stderr)
            return 1
        return 0
    if args.at:
        print_curves(folders, args.at)
        return 0
    print(f"| run | kind | map or env | engine | precision | env steps | wall-clock | test metric | "
          f"final (last {FINAL_TESTS}) | best | steps to {THRESHOLD} | status |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for folder in folders:
        print(row(folder))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
