"""marlkit's SMACv2 learning curves beside SMACv2's own, published from StarCraft II: a markdown table.

Usage (from the repository root):
    python scripts/smacv2_compare.py docs/results/smacv2 --published smac2_training_results.pkl
    python scripts/smacv2_compare.py RUN_DIR ... --published PKL --at 100000 1000000 --window 800000 1000000

SMACv2's curves are oxwhirl/smacv2's `smacv2/examples/results/smac2_training_results.pkl` (commit
cc6ad08, 2023-02-15): {scenario: {algorithm: [one pandas DataFrame per seed with the columns step,
mean_test_win_rate, mean_test_return]}}, pickled by pandas 1.x. It is read here without pandas (see
read_published): pandas 1.x does not install beside numpy 2, and marlkit needs neither. Get it with
    curl -LO https://github.com/oxwhirl/smacv2/raw/cc6ad08/smacv2/examples/results/smac2_training_results.pkl

marlkit's runs are sacred run folders under the given paths (as scripts/results_table.py finds them).
Their algorithm is the run's name (ALGORITHMS maps marlkit's preset names to SMACv2's), their scenario
the map name; the runs of one scenario, algorithm and observation rule are pooled as seeds and must
differ in nothing else (as results_table.py --mean). The observation rule is a column: SMACv2's
curves were made before its prob_obs_enemy lottery and the enemy-block wipe of its issue 50 (commit
d302663, 2023-06-06), when an agent saw every living enemy within its sight range; marlkit gives that
rule with env_args.hide_only_unobserved_enemies=True and prob_obs_enemy=1.0 (tests/test_smac_package.py).

Each cell is the mean over seeds and, in brackets, each seed's value: the test win rate logged at the
first test at or after the step, and the mean of the tests within the window. The last column places
each marlkit seed's window mean against the range of SMACv2's seeds there (below, inside or above).

    python scripts/smacv2_compare.py RUN_DIR ... --published PKL --batch-steps

prints instead what the test steps tell of each run's batch of parallel episodes, so that a published
curve's number of envs (`batch_size_run`, which SMACv2's file does not record) can be read from it beside
marlkit's runs of known envs. A PyMARL-style loop tests right after its first batch, and then after the
first batch that takes it `test_interval` steps past the previous test: the first test's step is the env
steps of the first batch (random play, so similar across simulators), and a test's overshoot of the
interval is below one batch's steps. SMACv2's file keeps only some tests, so an overshoot is read only
between tests one interval apart, and a first step only where it is below the interval; its curves are
read up to the last test of marlkit's runs of the scenario and algorithm, so that both cover the same steps.
"""
import argparse
import os
import pickle
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_table import check_one_setting, seed_groups  # noqa: E402
# (results_table puts src/ on the path)
from utils.run_index import first_at_or_after, rounded_test_nepisode, run_folders  # noqa: E402

# marlkit's preset names (config `name`) -> SMACv2's names in the results file: QMIX as docs/smacv2.md runs it,
# MAPPO as the paper ran it (mappo_smacv2; EPyMARL's `mappo` preset is another algorithm).
ALGORITHMS = {"qmix_env=8_adam_td_lambda": "QMIX", "mappo_smacv2": "MAPPO"}
PUBLISHED_RULE = "SMACv2 of 2023-02"
CURRENT_RULE = "SMACv2's current (issue 50)"
WIN_RATE = "test_battle_won_mean"

Curve = tuple[np.ndarray, np.ndarray]  # (env steps, test win rates) of one seed
Published = dict[str, dict[str, list[Curve]]]  # {scenario: {algorithm: [one Curve per seed]}}


# ---- SMACv2's results file, without pandas ----------------------------------------------------------------
class _Pickled:
    """Stands in for a pandas class: keeps the state pickle gives it."""

    def __setstate__(self, state):
        self.state = state


def _index_values(_cls, attributes: dict) -> np.ndarray:
    """pandas' _new_Index(cls, attributes): an Index is its data here."""
    return np.asarray(attributes["data"])


# numpy's array rebuilder, under whichever module this numpy keeps it (numpy.core before 2.0, numpy._core since).
_RECONSTRUCT = np.ndarray(0).__reduce__()[0]
# The dtypes of SMACv2's frames: column names (objects), steps (int64), win rates and returns (float64).
_DTYPES = {"O8", "i8", "f8"}


class _ArrayClass:
    """What the pickle gets for numpy.ndarray: accepted only as the class an empty array is rebuilt from
    (the array's contents then come through ndarray.__setstate__, which takes an object array's items as a
    list, never as raw memory). Calling it (numpy.ndarray(shape, dtype, buffer)) would let the file's bytes
    stand for object pointers, so it is refused."""

    def __call__(self, *args, **kwargs):
        raise pickle.UnpicklingError("numpy.ndarray called directly: not how pandas pickles a frame")


_ARRAY_CLASS = _ArrayClass()


def _empty_array(cls, shape: tuple, dtype_code: bytes) -> np.ndarray:
    """numpy's _reconstruct(ndarray, (0,), b'b'), the first step of unpickling an array; nothing else."""
    if cls is not _ARRAY_CLASS or shape != (0,) or dtype_code != b"b":
        raise pickle.UnpicklingError("an array rebuilt from anything but an empty ndarray")
    return _RECONSTRUCT(np.ndarray, shape, dtype_code)


def _dtype(code: str, align: bool = False, copy: bool = True) -> np.dtype:
    if code not in _DTYPES:
        raise pickle.UnpicklingError(f"dtype {code!r} is not among those of SMACv2's frames ({', '.join(sorted(_DTYPES))})")
    return np.dtype(code, align, copy)


class _PandasFreeUnpickler(pickle.Unpickler):
    """Unpickles pandas 1.x DataFrames as _Pickled objects; anything but pandas' frames, indexes and block
    managers, numpy arrays (rebuilt as pickle rebuilds them, of the dtypes in _DTYPES) and slices is refused:
    a pickle can call any function it names."""

    NUMPY = {("numpy.core.multiarray", "_reconstruct"): _empty_array,
             ("numpy._core.multiarray", "_reconstruct"): _empty_array,
             ("numpy", "ndarray"): _ARRAY_CLASS, ("numpy", "dtype"): _dtype}
    PANDAS = {("pandas.core.frame", "DataFrame"), ("pandas.core.internals.managers", "BlockManager"),
              ("pandas.core.indexes.base", "Index"), ("pandas.core.indexes.numeric", "Int64Index"),
              ("pandas.core.indexes.range", "RangeIndex")}

    def find_class(self, module: str, name: str):
        if (module, name) in self.NUMPY:
            return self.NUMPY[(module, name)]
        if (module, name) in self.PANDAS:
            return type(name, (_Pickled,), {})
        if (module, name) == ("pandas.core.indexes.base", "_new_Index"):
            return _index_values
        if (module, name) == ("builtins", "slice"):
            return slice
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a pandas DataFrame of SMACv2's results")


def _columns(frame: _Pickled) -> dict[str, np.ndarray]:
    """{column: values} of a pickled pandas 1.x DataFrame: its BlockManager's state keeps, under the
    version key "0.14.1", the axes (column names, row index) and the blocks, each [its columns, rows]
    with the columns it holds (mgr_locs)."""
    layout = frame.state["_mgr"].state[3]["0.14.1"]
    names = layout["axes"][0]
    columns = {}
    for block in layout["blocks"]:
        for name, values in zip(names[block["mgr_locs"]], block["values"]):
            columns[str(name)] = np.asarray(values)
    return columns


def read_published(path: str) -> Published:
    """{scenario: {algorithm: [(steps, test win rates) per seed]}} of SMACv2's results file."""
    with open(path, "rb") as f:
        try:
            results = _PandasFreeUnpickler(f).load()
        except (pickle.UnpicklingError, EOFError, TypeError, AttributeError, ValueError) as error:
            raise ValueError(f"{path} is not SMACv2's results file: {error}") from None
    curves: dict[str, dict[str, list[Curve]]] = {}
    try:
        for scenario, algorithms in results.items():
            for algorithm, frames in algorithms.items():
                seeds = [_columns(frame) for frame in frames]
                curves.setdefault(scenario, {})[algorithm] = [
                    (seed["step"].astype(np.int64), seed["mean_test_win_rate"].astype(np.float64)) for seed in seeds]
    except (AttributeError, KeyError, IndexError, TypeError) as error:
        raise ValueError(f"{path} is not SMACv2's results file ({{scenario: {{algorithm: [DataFrame per seed with step "
                         f"and mean_test_win_rate]}}}}): {type(error).__name__} {error}") from None
    return curves


# ---- the table ----------------------------------------------------------------------------------------
def value_at(curve: Curve, step: int) -> float | None:
    """The win rate of the first test at or after `step`; None if the run never got there."""
    steps, values = curve
    return first_at_or_after(values, steps, step)


def window_mean(curve: Curve, start: int, end: int) -> float | None:
    """The mean of the tests from the first at or after `start` to the first at or after `end` (the
    tests value_at gives for them, and those between); None if there is none."""
    steps, values = curve
    after = steps[steps >= end]
    last = after.min() if after.size else end
    inside = (steps >= start) & (steps <= last)
    return float(values[inside].mean()) if inside.any() else None


def short(step: int) -> str:
    """1000000 -> '1M', 800000 -> '800k', 12345 -> '12,345'."""
    for size, unit in ((1_000_000, "M"), (1_000, "k")):
        if step and step % size == 0:
            return f"{step // size:,}{unit}"
    return f"{step:,}"


def cell(values: list[float | None], form: str = "{:.2f}") -> str:
    """'mean (seed, seed, ...)', '-' for a seed without a value and for the mean of seeds not all having one
    (a mean of some seeds would pass for all of them)."""
    known = [value for value in values if value is not None]
    mean = form.format(sum(known) / len(known)) if known and len(known) == len(values) else "-"
    return f"{mean} ({', '.join('-' if value is None else form.format(value) for value in values)})"


def placement(ours: list[float | None], game: list[float | None]) -> str:
    """Where each of our seeds' window means lies against the range of the game's seeds."""
    game_known = [value for value in game if value is not None]
    if not game_known:
        return "no published value"
    low, high = min(game_known), max(game_known)
    counts = {"below": 0, "inside": 0, "above": 0}
    for value in (value for value in ours if value is not None):
        counts["below" if value < low else "above" if value > high else "inside"] += 1
    found = ", ".join(f"{n} {where}" for where, n in counts.items() if n)
    return f"{found or 'no value'} [{low:.3f}, {high:.3f}]"


def test_steps(info: dict) -> np.ndarray:
    """The env steps of a marlkit run's tests, from its info.json."""
    return np.asarray(info.get(f"{WIN_RATE}_T", []), dtype=np.int64)


def batch_evidence(steps: np.ndarray, interval: int) -> tuple[int | None, int | None]:
    """(the first test's step if it is the run's first test, the largest overshoot of `interval` between
    tests one interval apart) of one run's test steps; None where the steps do not tell."""
    gaps = np.diff(steps)
    overshoots = gaps[(gaps >= interval) & (gaps < 2 * interval)] - interval
    first = int(steps[0]) if steps.size and steps[0] < interval else None
    return first, (int(overshoots.max()) if overshoots.size else None)


def run_setting(config: dict, key: str, where: str) -> int:
    """A setting every PyMARL-style run records; ValueError naming the run where a config lacks it."""
    if key not in config:
        raise ValueError(f"{where}: its config.json has no {key!r}; pass marlkit's own training runs")
    return config[key]


def evidence_cells(evidence: list[tuple[int | None, int | None]]) -> str:
    """The two evidence cells of a row: its runs' first steps and largest overshoots ('-' for no run)."""
    if not evidence:
        return "- | -"
    firsts, overshoots = [run[0] for run in evidence], [run[1] for run in evidence]
    return f"{cell(firsts, '{:.0f}')} | {cell(overshoots, '{:.0f}')}"


def batch_table(folders: list[str], published: Published, published_interval: int) -> list[str]:
    """The --batch-steps lines: per scenario and algorithm, SMACv2's seeds, then marlkit's grouped by envs
    and observation rule. SMACv2's curves are read only up to the last test of marlkit's runs beside them:
    its 10M-step runs would otherwise offer overshoots from ten times as many tests."""
    ours: dict[tuple[str, str], dict[tuple[int, str], list[tuple[str, np.ndarray, int]]]] = {}
    for (scenario, name), runs in seed_groups(folders).items():
        for config, info in runs:
            where = f"the {name} run on {scenario} with seed {config.get('seed')} ({config.get('unique_token')})"
            envs = run_setting(config, "batch_size_run", where)
            interval = run_setting(config, "test_interval", where)
            groups = ours.setdefault((scenario, ALGORITHMS.get(name, name)), {})
            groups.setdefault((envs, observation_rule(config)), []).append(
                (str(config.get("seed")), test_steps(info), interval))
    lines = ["| scenario | algorithm | source | observation rule | parallel envs | runs (seeds) | "
             "first test's step (the first batch) | largest overshoot of the test interval (under one batch) |",
             "|---" * 8 + "|"]
    for scenario, algorithm in sorted(ours):
        groups = ours[(scenario, algorithm)]
        last = max((int(steps.max()) for runs in groups.values() for _, steps, _ in runs if steps.size), default=0)
        game = [steps[steps <= last] for steps, _ in published.get(scenario, {}).get(algorithm, [])]
        lines.append(f"| {scenario} | {algorithm} | StarCraft II (SMACv2's file) | {PUBLISHED_RULE} | not recorded | "
                     f"{f'{len(game)} (unseeded)' if game else 'none in the file'} | "
                     f"{evidence_cells([batch_evidence(steps, published_interval) for steps in game])} |")
        for (envs, rule), runs in sorted(groups.items()):
            lines.append(f"| {scenario} | {algorithm} | marlkit | {rule} | {envs} | "
                         f"{len(runs)} ({', '.join(seed for seed, _, _ in runs)}) | "
                         f"{evidence_cells([batch_evidence(steps, interval) for _, steps, interval in runs])} |")
    return lines


def observation_rule(config: dict) -> str:
    env_args = config.get("env_args", {})
    published = env_args.get("hide_only_unobserved_enemies") and env_args.get("prob_obs_enemy", 1.0) == 1.0
    return PUBLISHED_RULE if published else CURRENT_RULE


def our_curves(folders: list[str]) -> dict[tuple[str, str, str], tuple[list[str], list[Curve], int]]:
    """{(scenario, SMACv2's algorithm name, observation rule): (seeds, curves, test episodes per test)} of
    marlkit's training runs;
    ValueError where a group's runs differ in a setting or an algorithm has no SMACv2 name."""
    groups: dict[tuple[str, str, str], list[tuple[dict, dict]]] = {}
    for (scenario, name), runs in seed_groups(folders).items():
        if name not in ALGORITHMS:
            raise ValueError(f"the runs on {scenario} named {name!r} are not one of SMACv2's algorithms "
                             f"({', '.join(ALGORITHMS)}); pass only QMIX and MAPPO runs")
        for config, info in runs:
            groups.setdefault((scenario, ALGORITHMS[name], observation_rule(config)), []).append((config, info))
    found = {}
    for (scenario, algorithm, rule), runs in groups.items():
        where = f"the {algorithm} runs on {scenario} ({rule})"
        check_one_setting([config for config, _ in runs], where)
        curves = [(test_steps(info), np.asarray(info.get(WIN_RATE, []), dtype=np.float64)) for _, info in runs]
        setting = runs[0][0]  # (the group's runs share it)
        episodes = rounded_test_nepisode(run_setting(setting, "test_nepisode", where),
                                         run_setting(setting, "batch_size_run", where))
        found[(scenario, algorithm, rule)] = ([str(config.get("seed")) for config, _ in runs], curves, episodes)
    return found


def table(ours: dict, published: dict, at: list[int], window: tuple[int, int]) -> list[str]:
    """The markdown lines: per scenario and algorithm, SMACv2's row then marlkit's rows."""
    start, end = window
    span = f"{short(start)}–{short(end)}"
    lines = [f"| scenario | algorithm | source | observation rule | seeds | {' | '.join(map(short, at))} | {span} | "
             f"against the game's seeds ({span}) |",
             "|---" * (7 + len(at)) + "|"]
    for scenario, algorithm in sorted({(s, a) for s, a, _ in ours}):
        game = published.get(scenario, {}).get(algorithm, [])
        game_window = [window_mean(curve, start, end) for curve in game]
        if game:
            steps = " | ".join(cell([value_at(curve, step) for curve in game]) for step in at)
            lines.append(f"| {scenario} | {algorithm} | StarCraft II (SMACv2's file, 32 test episodes) | "
                         f"{PUBLISHED_RULE} | {len(game)} | {steps} | {cell(game_window)} | |")
        for rule in (PUBLISHED_RULE, CURRENT_RULE):
            if (scenario, algorithm, rule) not in ours:
                continue
            seeds, curves, episodes = ours[(scenario, algorithm, rule)]
            window_values = [window_mean(curve, start, end) for curve in curves]
            steps = " | ".join(cell([value_at(curve, step) for curve in curves]) for step in at)
            lines.append(f"| {scenario} | {algorithm} | marlkit ({episodes} test episodes) | {rule} | {', '.join(seeds)} | "
                         f"{steps} | {cell(window_values)} | {placement(window_values, game_window)} |")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", help="sacred run folders of marlkit's runs, or folders above them")
    parser.add_argument("--published", required=True, metavar="PKL", help="SMACv2's smac2_training_results.pkl")
    parser.add_argument("--at", nargs="+", type=int, default=[100_000, 200_000, 500_000, 1_000_000], metavar="STEP")
    parser.add_argument("--window", nargs=2, type=int, default=[800_000, 1_000_000], metavar=("START", "END"))
    parser.add_argument("--batch-steps", action="store_true",
                        help="what the test steps tell of each run's batch of parallel episodes (see above)")
    parser.add_argument("--published-interval", type=int, default=10_000, metavar="STEPS",
                        help="the test_interval of SMACv2's runs (PyMARL2's sc2.yaml and benellis3/mappo: 10000)")
    args = parser.parse_args(argv)
    if min(args.at) < 0 or not 0 <= args.window[0] <= args.window[1] or args.published_interval <= 0:
        parser.error("--at takes env steps (non-negative); --window START END with START <= END; "
                     "--published-interval a positive step count")
    try:
        published = read_published(args.published)
        folders = run_folders(args.paths)
        if not folders:
            raise ValueError(f"no sacred run folder (config.json, run.json, info.json) under {', '.join(args.paths)}")
        if args.batch_steps:
            lines = batch_table(folders, published, args.published_interval)
        else:
            lines = table(our_curves(folders), published, args.at, tuple(args.window))
    except (OSError, ValueError) as error:
        print(f"smacv2_compare.py: error: {error}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
