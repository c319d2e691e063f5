"""Robust aggregate statistics of sacred runs for scripts/results_table.py (--aggregate, --improvement,
--figures, --marl-eval): the scores of runs grouped by algorithm and task, and what is printed and written
from them. The statistics themselves are src/utils/robust_stats.py.

A run's algorithm is its name (less src/sweep.py's `_seed<seed>`), its task its map (or env), and its score
at a step the test metric logged at the first test at or after that step ("final": the mean of its last
FINAL_TESTS tests). Win rates are scores as they are; returns are normalised per task to [0, 1] by the
smallest and largest test return any run of the set logged on that task (min-max, as marl-eval does).
"""
import json
import os
import sys
from dataclasses import dataclass

import numpy as np

from results_table import FINAL_TESTS, check_one_setting, seed_groups
from utils import robust_stats
from utils.run_index import EPISODE_RECORD, first_at_or_after, read_json, run_kind, run_where, test_metric

FEW_RUNS = 3  # fewer runs than this in a cell: a warning
CURVE_POINTS = 20  # steps of a sample-efficiency curve


ABSOLUTE = "absolute"  # the score "step" of the absolute metric


@dataclass
class Cell:
    """The runs of one algorithm on one task, with each run's absolute-metric evaluation (info.json) if any."""
    algorithm: str
    task: str
    env: str
    configs: list[dict]
    infos: list[dict]
    absolute: list[dict | None]

    @property
    def metric(self) -> str:
        return test_metric(self.infos[0]) or "no test"


def absolute_evaluations(folders: list[str]) -> dict[str, tuple[str, dict, dict]]:
    """{unique_token of a training run: (folder, config.json, info.json) of its absolute-metric evaluation}
    among `folders` (the evaluation names its run by the token it read from the run's checkpoint); ValueError
    for two of one run."""
    found: dict[str, tuple[str, dict, dict]] = {}
    for folder in folders:
        config = read_json(os.path.join(folder, "config.json"))
        if run_kind(config) != "evaluate":
            continue
        info = read_json(os.path.join(folder, "info.json"))
        token = info.get("absolute_metric", {}).get("unique_token")
        if token is None:
            continue
        if token in found:
            raise ValueError(f"two absolute-metric evaluations of run {token}: {found[token][0]} and {folder}; "
                             f"pass the folder of one")
        found[token] = (folder, config, info)
    return found


def cells(folders: list[str]) -> list[Cell]:
    """The training runs under `folders` as cells; ValueError where a cell's runs differ in a setting."""
    absolute = absolute_evaluations(folders)
    found = []
    for (task, algorithm), runs in sorted(seed_groups(folders).items()):
        configs = [config for config, _ in runs]
        check_one_setting(configs, f"the {algorithm} runs on {task}")
        for config, info in runs:
            if test_metric(info) is None:
                raise ValueError(f"the {algorithm} run on {task} (seed {config.get('seed')}, "
                                 f"{config.get('unique_token')}) logged no test yet: leave it out")
        evaluations = []
        for config in configs:
            folder, evaluated, info = absolute.get(config.get("unique_token"), (None, None, None))
            if evaluated is not None and run_where(evaluated) != task:
                raise ValueError(f"the absolute-metric evaluation {folder} of the {algorithm} run on {task} played "
                                 f"{run_where(evaluated)}: evaluate with the run's own env settings")
            evaluations.append(info)
        found.append(Cell(algorithm, task, configs[0]["env"], configs, [info for _, info in runs], evaluations))
    return found


def score(info: dict, metric: str, step: int | str | None, absolute: dict | None = None) -> float | None:
    """The run's test metric at `step` (first test at or after it), the mean of its last FINAL_TESTS tests
    for None, or for ABSOLUTE its absolute-metric evaluation's; None where the run has no such test."""
    if step == ABSOLUTE:
        return float(absolute[metric][0]) if absolute and absolute.get(metric) else None
    values, steps = info.get(metric, []), info.get(f"{metric}_T", [])
    if step is None:
        return float(np.mean(values[-FINAL_TESTS:])) if values else None
    return first_at_or_after(values, steps, step)


def normaliser(task_cells: list[Cell]):
    """A task's score -> [0, 1] rule: win rates unchanged, returns min-max over every test of the task's runs."""
    metric = task_cells[0].metric
    if metric == "test_battle_won_mean":
        return lambda value: value
    logged = [v for cell in task_cells for info in cell.infos for v in info.get(metric, [])]
    low, high = min(logged), max(logged)
    return lambda value: (value - low) / (high - low) if high > low else 0.0


def score_matrices(found: list[Cell], step: int | None) -> dict[str, np.ndarray]:
    """{algorithm: normalised scores [runs, tasks]} at `step`, tasks in name order; ValueError naming what
    does not fit one matrix (a task one algorithm lacks, unequal runs, a run without a test at the step)."""
    tasks = sorted({cell.task for cell in found})
    by_task = {task: [cell for cell in found if cell.task == task] for task in tasks}
    metrics = {task: {cell.metric for cell in task_cells} for task, task_cells in by_task.items()}
    for task, names in metrics.items():
        if len(names) > 1:
            raise ValueError(f"the runs on {task} log different test metrics ({', '.join(sorted(names))})")
    norms = {task: normaliser(task_cells) for task, task_cells in by_task.items()}
    matrices = {}
    for algorithm in sorted({cell.algorithm for cell in found}):
        columns = []
        for task in tasks:
            cell = next((c for c in by_task[task] if c.algorithm == algorithm), None)
            if cell is None:
                raise ValueError(f"{algorithm} has no run on {task}: aggregates over tasks need every algorithm "
                                 f"on every task; pass the folders of one task set")
            values = [score(info, cell.metric, step, absolute) for info, absolute in zip(cell.infos, cell.absolute)]
            if None in values:
                seed = cell.configs[values.index(None)].get("seed")
                missing = ("no absolute-metric evaluation (evaluate=True absolute_metric=True)" if step == ABSOLUTE
                           else f"no test at or after t_env {step:,}")
                raise ValueError(f"{algorithm} on {task} (seed {seed}) has {missing}")
            columns.append([norms[task](value) for value in values])
        if len({len(column) for column in columns}) > 1:
            raise ValueError(f"{algorithm} has {', '.join(str(len(c)) for c in columns)} runs on {', '.join(tasks)}: "
                             f"the stratified bootstrap needs the same number of runs on every task")
        matrices[algorithm] = np.array(columns).T  # [runs, tasks]
    return matrices


def few_runs_warnings(found: list[Cell]) -> list[str]:
    return [f"warning: {cell.algorithm} on {cell.task} has {len(cell.infos)} run(s): intervals from fewer than "
            f"{FEW_RUNS} runs say little" for cell in found if len(cell.infos) < FEW_RUNS]


def interval_text(point: float, low: float, high: float) -> str:
    return f"{point:.2f} [{low:.2f}, {high:.2f}]"


def step_name(step: int | str | None) -> str:
    if step == ABSOLUTE:
        return "absolute metric (the best checkpoint re-tested on 10 x test_nepisode episodes)"
    return f"t_env {step:,}" if step is not None else f"final (mean of the last {FINAL_TESTS} tests)"


def aggregate_table(matrices: dict[str, np.ndarray], step: int | None) -> list[str]:
    """Markdown: per algorithm, each aggregate over its runs and tasks with its 95% interval."""
    names = list(robust_stats.AGGREGATES)
    lines = [f"Score: {step_name(step)} (win rates as they are, returns min-max normalised per task); 95% "
             f"stratified bootstrap intervals ({robust_stats.INTERVAL_REPS:,} resamples).", "",
             f"| algorithm | tasks | runs per task | {' | '.join(f'{name} [95% CI]' for name in names)} |",
             "|---" * (3 + len(names)) + "|"]
    for algorithm, scores in matrices.items():
        cells_text = [interval_text(*robust_stats.interval(metric, scores)) for metric in robust_stats.AGGREGATES.values()]
        lines.append(f"| {algorithm} | {scores.shape[1]} | {scores.shape[0]} | {' | '.join(cells_text)} |")
    return lines


def per_task_table(matrices: dict[str, np.ndarray], tasks: list[str]) -> list[str]:
    """Markdown: each algorithm's IQM and mean on each task apart, with their 95% intervals."""
    lines = ["| task | algorithm | runs | IQM [95% CI] | mean [95% CI] |", "|---|---|---|---|---|"]
    for k, task in enumerate(tasks):
        for algorithm, scores in matrices.items():
            column = scores[:, [k]]  # [runs, 1]
            lines.append(f"| {task} | {algorithm} | {column.shape[0]} | "
                         f"{interval_text(*robust_stats.interval(robust_stats.iqm, column))} | "
                         f"{interval_text(*robust_stats.interval(robust_stats.mean, column))} |")
    return lines


def improvement_lines(matrices: dict[str, np.ndarray], pairs: list[tuple[str, str]]) -> list[str]:
    """Markdown: P(X > Y) with its 95% interval for each pair."""
    lines = ["| X | Y | P(X > Y) [95% CI] |", "|---|---|---|"]
    for x, y in pairs:
        for name in (x, y):
            if name not in matrices:
                raise ValueError(f"--improvement names {name!r}, which is not among the runs "
                                 f"({', '.join(matrices)})")
        estimate = robust_stats.interval(robust_stats.improvement_probability, matrices[x], matrices[y])
        lines.append(f"| {x} | {y} | {interval_text(*estimate)} |")
    return lines


def curve_steps(found: list[Cell]) -> list[int]:
    """The steps of the sample-efficiency curve: CURVE_POINTS evenly spaced up to the earliest last test
    among the runs (each run's value there: its first test at or after the step)."""
    last = min(info[f"{cell.metric}_T"][-1] for cell in found for info in cell.infos)
    return [int(step) for step in np.linspace(0, last, CURVE_POINTS + 1)[1:]]


def marl_eval(found: list[Cell]) -> tuple[dict, list[str]]:
    """marl-eval's JSON layout, {env: {task: {algorithm: {"seed_<seed>": {"step_<k>": {"step_count": t_env,
    "return": [...], "win_rate": [...]}, "absolute_metrics": {...}}}}}}, from each test round's per-episode
    values (EPISODE_RECORD) and the run's absolute-metric evaluation where one is among the folders; a run from
    before per-episode values were kept gives each round's mean as a one-value list (named in the notes)."""
    data: dict = {}
    without = []
    for cell in found:
        runs = data.setdefault(cell.env, {}).setdefault(cell.task, {}).setdefault(cell.algorithm, {})
        for config, info, absolute in zip(cell.configs, cell.infos, cell.absolute):
            runs[f"seed_{config.get('seed')}"], missing = run_steps(info)
            if absolute:
                episodes = absolute[EPISODE_RECORD]
                runs[f"seed_{config.get('seed')}"]["absolute_metrics"] = {
                    "return": episodes["return"][0],
                    **({"win_rate": episodes["battle_won"][0]} if "battle_won" in episodes else {})}
            if missing:
                without.append(f"{cell.algorithm} on {cell.task} seed {config.get('seed')}")
    if not without:
        return data, []
    named = ", ".join(without[:3]) + (f" and {len(without) - 3} more" if len(without) > 3 else "")
    return data, [f"note: {len(without)} run(s) kept no per-episode values for some or all test rounds ({named}): "
                  f"each such round stands as a one-value list of its mean"]


MARL_EVAL_METRICS = {"return": ("test_return_mean", "test_total_return_mean"), "win_rate": ("test_battle_won_mean",)}
EPISODE_NAMES = {"return": "return", "win_rate": "battle_won"}  # marl-eval's metric -> EPISODE_RECORD's list


def run_steps(info: dict) -> tuple[dict, int]:
    """({"step_<k>": {...}} of one run (see marl_eval), the rounds that had no per-episode returns): each test
    round the run logged, with its episodes' values where they were kept, else its mean as a one-value list
    (a run resumed from a checkpoint of before they were kept has them only for its later rounds)."""
    episodes = info.get(EPISODE_RECORD) or {"T": []}
    at = {t: k for k, t in enumerate(episodes["T"])}
    means = {name: next(((info[key], info[f"{key}_T"]) for key in keys if key in info), None)
             for name, keys in MARL_EVAL_METRICS.items()}
    steps, without = {}, 0
    for k, t in enumerate(means["return"][1]):
        entry = {"step_count": t}
        for name, found in means.items():
            if found is None:
                continue
            values, logged_at = found
            kept = episodes.get(EPISODE_NAMES[name], [])
            per_episode = kept[at[t]] if t in at and at[t] < len(kept) else None
            entry[name] = per_episode if per_episode is not None else [values[logged_at.index(t)]]
            without += name == "return" and per_episode is None
        steps[f"step_{k}"] = entry
    return steps, without


def write_marl_eval(found: list[Cell], path: str) -> list[str]:
    data, notes = marl_eval(found)
    with open(path, "w") as f:
        json.dump(data, f)
    lacking = sum(absolute is None for cell in found for absolute in cell.absolute)
    if lacking:  # marl-eval's data_process_pipeline counts a run's steps as its keys less absolute_metrics
        notes.append(f"note: {lacking} run(s) have no absolute_metrics, which marl-eval's tools expect in every "
                     f"run: evaluate each with evaluate=True absolute_metric=True and pass its folder too")
    return notes


def figures(found: list[Cell], at: list, pairs: list[tuple[str, str]], folder: str) -> list[str]:
    """aggregates.png, performance_profile.png, sample_efficiency.png and (with pairs) improvement.png in
    `folder` (src/plot.py draws them) -> their paths."""
    import plot

    os.makedirs(folder, exist_ok=True)
    step = at[-1] if at else None
    matrices = score_matrices(found, step)
    title = step_name(step)
    paths = [plot.aggregate_intervals(matrices, os.path.join(folder, "aggregates.png"), title),
             plot.performance_profiles(matrices, os.path.join(folder, "performance_profile.png"), title)]
    steps = curve_steps(found)
    curves = {algorithm: [] for algorithm in matrices}
    for point in steps:
        for algorithm, scores in score_matrices(found, point).items():
            curves[algorithm].append(robust_stats.interval(robust_stats.iqm, scores, reps=robust_stats.PROFILE_REPS))
    paths.append(plot.sample_efficiency(steps, curves, os.path.join(folder, "sample_efficiency.png")))
    if pairs:
        estimates = {f"P({x} > {y})": robust_stats.interval(robust_stats.improvement_probability, matrices[x],
                                                            matrices[y]) for x, y in pairs}
        paths.append(plot.improvement(estimates, os.path.join(folder, "improvement.png"), title))
    return paths


def report(folders: list[str], at: list | None, pairs: list[tuple[str, str]], figure_folder: str | None,
           marl_eval_path: str | None, tables: bool = True) -> list[str]:
    """The lines --aggregate prints (without `tables`, none: --marl-eval alone); warnings and the files
    written go to stderr. ValueError for input that does not fit (see score_matrices)."""
    found = cells(folders)
    if not found:
        raise ValueError("no training run among the given folders")
    lines = []
    for step in (at or [None]) if tables else []:
        matrices = score_matrices(found, step)
        lines += aggregate_table(matrices, step) + [""]
        tasks = sorted({cell.task for cell in found})
        if len(tasks) > 1:
            lines += per_task_table(matrices, tasks) + [""]
        if pairs:
            lines += improvement_lines(matrices, pairs) + [""]
    notes = few_runs_warnings(found)
    if marl_eval_path:
        notes += write_marl_eval(found, marl_eval_path) + [f"wrote {marl_eval_path} (marl-eval's JSON layout)"]
    if figure_folder:
        notes += [f"wrote {path}" for path in figures(found, at, pairs, figure_folder)]
    for note in notes:
        print(note, file=sys.stderr)
    return lines
