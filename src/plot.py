"""Learning curves of many runs: mean and spread over seeds per config group, and a results table.

    python src/plot.py results/sacred/3m --metric test_battle_won_mean --group-by epsilon_anneal_time

Reads every sacred training run folder (config.json, run.json, info.json) under the given paths
(evaluation runs are left out); with `--source tb` the curve comes from the run's TensorBoard events
instead of info.json, found by the unique_token the run recorded in its config.json. Runs are grouped
by what they learned with: by default runs whose configs differ only in seeds and bookkeeping
(NOT_LEARNING) are one group, labelled by the settings that tell the groups apart; with --group-by
by the values of those config keys, and a group whose runs differ in any other setting is refused
rather than pooled. Each run's curve is interpolated onto a common t_env grid of its group, and the
group's mean over seeds is drawn with a shaded band (--spread std | ci95). Writes <out>.png,
<out>.svg, and a table of the final and best value per group as <out>.csv and <out>.md.

Data functions (`load_runs`, `group_runs`, `align`, `summarise`) are importable for tests and
notebooks; only `plot` needs matplotlib.
"""
import argparse
import csv
import os
import re
import sys
from dataclasses import dataclass
from typing import Optional

import numpy as np

from utils.run_index import EPISODE_RECORD, SEED_BATCH_KEYS, flatten, get_dotted, read_json, run_folders, run_kind

# Two-sided 95% Student-t critical values for 1..30 degrees of freedom; the normal 1.96 beyond.
T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
       2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
       2.045, 2.042)
SPREADS = ("std", "ci95")
SOURCES = ("sacred", "tb")
# Config keys that do not change what a run learns (seeds, where and how often it logs, saves and
# tests, speed settings): runs that differ only in these are seeds of one setting.
NOT_LEARNING = {"seed", "env_args.seed", "env_seeds", "unique_token", "name", "label", "repeat_id", *SEED_BATCH_KEYS,
                "local_results_path", "checkpoint_path", "resume", "load_step", "save_model", "save_model_interval",
                "save_buffer", "use_tensorboard", "log_interval", "runner_log_interval", "learner_log_interval",
                "test_interval", "test_nepisode", "env_worker_timeout", "env_worker_max_failures", "env_processes",
                "learner_threads", "tune_learner_threads", "buffer_cpu_only", "use_cuda", "evaluate", "save_replay",
                "run_kind", "env_args.replay_dir", "env_args.replay_prefix", "env_args.record_replay",
                "env_args.debug"}


@dataclass
class Run:
    """One sacred run and one metric's curve."""
    path: str
    name: str
    status: str
    config: dict
    t: np.ndarray       # [n_points] t_env, increasing
    values: np.ndarray  # [n_points]


@dataclass
class Aligned:
    """A group's runs interpolated onto a common t_env grid."""
    label: str
    runs: list
    t: np.ndarray       # [n_points]
    values: np.ndarray  # [n_runs, n_points]

    @property
    def mean(self) -> np.ndarray:
        return self.values.mean(axis=0)


def sacred_curve(folder: str, metric: str) -> Optional[tuple]:
    """(t_env, values) of `metric` from info.json, or None when the run did not log it."""
    info = read_json(os.path.join(folder, "info.json"))
    if metric not in info or f"{metric}_T" not in info:
        return None
    return np.asarray(info[f"{metric}_T"], dtype=float), np.asarray(info[metric], dtype=float)


def results_root(folder: str) -> str:
    """The results folder a sacred run folder lies in (<results>/sacred/.../<run id>)."""
    parent = folder
    while os.path.basename(parent) != "sacred":
        if os.path.dirname(parent) == parent:
            raise ValueError(f"{folder} is not inside a <results>/sacred/ folder, so its tb_logs/ cannot be found")
        parent = os.path.dirname(parent)
    return os.path.dirname(parent)


def tb_curve(folder: str, config: dict, metric: str) -> Optional[tuple]:
    """(t_env, values) of `metric` from the TensorBoard events of the run (<results>/tb_logs/<the
    unique_token its config.json records>; a resumed run continues its checkpoint's token); None when
    it did not log the metric. ValueError for a run whose events cannot be identified or do not exist."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    token = config.get("unique_token")
    if not token:
        raise ValueError(f"{folder} records no unique_token (made before marlkit wrote it into config.json), so "
                         f"its TensorBoard events cannot be told from other runs'; use --source sacred")
    if not config.get("use_tensorboard"):
        raise ValueError(f"{folder} wrote no TensorBoard events (use_tensorboard=False); use --source sacred")
    events_dir = os.path.join(results_root(folder), "tb_logs", token)
    if not os.path.isdir(events_dir):
        raise ValueError(f"{folder}: its TensorBoard events {events_dir} are missing; use --source sacred")
    events = EventAccumulator(events_dir, size_guidance={"scalars": 0})
    events.Reload()
    if metric not in events.Tags()["scalars"]:
        return None
    scalars = events.Scalars(metric)
    return np.array([s.step for s in scalars], dtype=float), np.array([s.value for s in scalars], dtype=float)


def load_runs(paths: list, metric: str, source: str = "sacred", include_unfinished: bool = False,
              note=lambda text: None) -> list:
    """The training runs under `paths` that logged `metric`, as Runs sorted by folder. Only COMPLETED
    runs unless `include_unfinished` (an interrupted run that was resumed would otherwise count twice);
    evaluation runs never (their curve is one test). `note` gets a line about the runs left out."""
    if source not in SOURCES:
        raise ValueError(f"unknown --source '{source}'; use one of: {', '.join(SOURCES)}")
    folders = run_folders(paths)
    if not folders:
        raise ValueError(f"no sacred run folders (config.json + run.json + info.json) under {', '.join(paths)}")
    runs, seen_metrics, evaluations = [], set(), 0
    for folder in folders:
        config = read_json(os.path.join(folder, "config.json"))
        if run_kind(config) != "train":
            evaluations += 1
            continue
        status = read_json(os.path.join(folder, "run.json")).get("status", "")
        if status != "COMPLETED" and not include_unfinished:
            continue
        curve = sacred_curve(folder, metric) if source == "sacred" else tb_curve(folder, config, metric)
        if curve is None:
            seen_metrics.update(k for k in read_json(os.path.join(folder, "info.json"))
                                if not k.endswith("_T") and k != EPISODE_RECORD)
            continue
        t, values = curve
        order = np.argsort(t, kind="stable")
        runs.append(Run(folder, config.get("name", ""), status, config, t[order], values[order]))
    if evaluations:
        note(f"left out {evaluations} evaluation run(s) (run_kind evaluate)")
    if not runs:
        known = f"; metrics logged: {', '.join(sorted(seen_metrics))}" if seen_metrics else ""
        raise ValueError(f"no {'' if include_unfinished else 'completed '}training run under {', '.join(paths)} "
                         f"logged '{metric}'{known}")
    return runs


def learning_settings(run: Run) -> dict:
    """The run's flattened config without the keys that do not change what it learns (NOT_LEARNING),
    plus its name without the _seed<N> suffix."""
    settings = {key: value for key, value in flatten(run.config).items() if key not in NOT_LEARNING}
    settings["name"] = re.sub(r"_seed-?\d+$", "", run.name)
    return settings


def differing_keys(settings: list) -> list:
    """The keys whose values are not the same in all `settings` (dicts), sorted."""
    keys = set().union(*settings)
    return sorted(key for key in keys if len({repr(s.get(key)) for s in settings}) > 1)


def group_runs(runs: list, keys: list) -> dict:
    """{label: [runs]} in the order of the group values. With `keys`, runs are grouped by their values,
    and a group whose runs differ in any other learning setting is refused (ValueError). Without, runs
    with the same learning settings are one group, labelled by the settings that differ between groups
    (or by the run name when only that differs)."""
    settings = [learning_settings(run) for run in runs]
    if keys:
        labels = [group_label(run, keys) for run in runs]
    else:
        shown = [key for key in differing_keys(settings) if key != "name"]
        labels = [", ".join(f"{key}={s.get(key)}" for key in shown) or s["name"] for s in settings]
        if len(set(labels)) < len({repr(sorted(s.items())) for s in settings}):
            labels = [f"{s['name']}, {label}" if shown else label for s, label in zip(settings, labels)]
    groups = {}
    for run, run_settings, label in zip(runs, settings, labels):
        groups.setdefault(label, []).append((run, run_settings))
    for label, members in groups.items():
        mixed = [key for key in differing_keys([s for _, s in members]) if key not in keys]
        if mixed:
            key = mixed[0]
            (a, sa), (b, sb) = next(((x, y) for x, y in zip(members, members[1:]) if x[1].get(key) != y[1].get(key)))
            raise ValueError(f"the runs of group '{label}' differ in {key} ({sa.get(key)!r} in {a.path}, "
                             f"{sb.get(key)!r} in {b.path}): add it to --group-by, or plot them separately")
    return {label: [run for run, _ in groups[label]] for label in sorted(groups, key=sort_key)}


def group_label(run: Run, keys: list) -> str:
    """'key=value, ...' of the group-by keys."""
    parts = []
    for key in keys:
        try:
            parts.append(f"{key}={get_dotted(run.config, key)}")
        except KeyError:
            raise ValueError(f"--group-by key '{key}' is not in the config of {run.path}; "
                             f"use a key of its config.json (dotted for nested keys, e.g. env_args.map_name)") from None
    return ", ".join(parts)


def sort_key(label: str) -> tuple:
    """Sort labels by their values, numerically where they are numbers (5000 before 20000)."""
    key = []
    for part in label.split(", "):
        value = part.split("=", 1)[-1]
        try:
            key.append((0, float(value), ""))
        except ValueError:
            key.append((1, 0.0, value))
    return tuple(key)


def align(runs: list, n_points: int = 200, label: str = "") -> Aligned:
    """Put `runs` on one t_env grid: their own t_env when all logged at the same steps, else
    `n_points` evenly spaced steps over the range all runs cover (no extrapolation), with each
    run linearly interpolated."""
    first = runs[0].t
    if all(len(run.t) == len(first) and np.array_equal(run.t, first) for run in runs):
        grid = first
    else:
        low, high = max(run.t[0] for run in runs), min(run.t[-1] for run in runs)
        if low > high:
            raise ValueError(f"the runs of group '{label}' share no t_env range; compare runs of one sweep")
        grid = np.linspace(low, high, n_points)
    values = np.stack([np.interp(grid, run.t, run.values) for run in runs])  # [n_runs, n_points]
    return Aligned(label, runs, grid, values)


def spread(values: np.ndarray, kind: str) -> np.ndarray:
    """Half-width of the band around the mean over runs (axis 0): the standard deviation, or the
    95% confidence interval of the mean (Student t); 0 for a single run."""
    n = values.shape[0]
    if n < 2:
        return np.zeros(values.shape[1])
    if kind == "std":
        return values.std(axis=0)
    if kind == "ci95":
        t95 = T95[n - 2] if n - 1 <= len(T95) else 1.96
        return t95 * values.std(axis=0, ddof=1) / np.sqrt(n)
    raise ValueError(f"unknown --spread '{kind}'; use one of: {', '.join(SPREADS)}")


def summarise(aligned: list, spread_kind: str = "std") -> list:
    """One row per group: seeds; final = the mean curve's last point (each run's last logged value
    when the runs share their steps) with the band's half-width there; best = the highest point of
    the mean curve and its t_env."""
    rows = []
    for group in aligned:
        mean_curve, band = group.mean, spread(group.values, spread_kind)
        best = int(np.argmax(mean_curve))
        rows.append({
            "group": group.label,
            "seeds": len(group.runs),
            "final_mean": float(mean_curve[-1]),
            "final_spread": float(band[-1]),
            "best_mean": float(mean_curve[best]),
            "best_t_env": int(group.t[best]),
            "t_env_end": int(group.t[-1]),
        })
    return rows


def markdown_table(rows: list, metric: str, spread_kind: str) -> str:
    lines = [f"| group | seeds | final {metric} (mean ± {spread_kind}) | at t_env | best of the mean curve | at t_env |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['group']} | {row['seeds']} | {row['final_mean']:.3f} ± {row['final_spread']:.3f} "
                     f"| {row['t_env_end']:,} | {row['best_mean']:.3f} | {row['best_t_env']:,} |")
    return "\n".join(lines) + "\n"


def write_table(rows: list, out: str, metric: str, spread_kind: str) -> str:
    with open(out + ".csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    table = markdown_table(rows, metric, spread_kind)
    with open(out + ".md", "w") as f:
        f.write(table)
    return table


def plot(aligned: list, out: str, metric: str, spread_kind: str, title: str = "") -> None:
    """Mean curve and shaded spread per group, saved as <out>.png and <out>.svg."""
    import matplotlib.ticker

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for group in aligned:
        mean, band = group.mean, spread(group.values, spread_kind)
        line, = ax.plot(group.t, mean, label=f"{group.label} (n={len(group.runs)})", linewidth=1.8)
        ax.fill_between(group.t, mean - band, mean + band, color=line.get_color(), alpha=0.2, linewidth=0)
    ax.set_xlabel("t_env (environment steps)")
    ax.set_ylabel(metric)
    ax.set_title(title or f"{metric}: mean ± {spread_kind} over seeds")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(steps_label))
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(f"{out}.{ext}")
    plt.close(fig)


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path: str) -> str:
    fig.tight_layout()
    fig.savefig(path)
    import matplotlib.pyplot as plt
    plt.close(fig)
    return path


def aggregate_intervals(matrices: dict, path: str, title: str) -> str:
    """One panel per aggregate of utils/robust_stats.py: each algorithm's estimate and 95% interval."""
    from utils import robust_stats

    plt = _pyplot()
    names = list(robust_stats.AGGREGATES)
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 0.3 * len(matrices) + 1.4), dpi=110,
                             sharey=True)
    for ax, (name, metric) in zip(axes, robust_stats.AGGREGATES.items()):
        for row, scores in enumerate(matrices.values()):
            point, low, high = robust_stats.interval(metric, scores)
            ax.plot([low, high], [row, row], linewidth=5, alpha=0.4, solid_capstyle="butt")
            ax.plot([point], [row], "k|", markersize=10)
        ax.set_title(name, fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(matrices)), list(matrices), fontsize=8)
    fig.suptitle(f"{title}: estimate and 95% stratified bootstrap interval", fontsize=9)
    return _save(fig, path)


def performance_profiles(matrices: dict, path: str, title: str) -> str:
    """Each algorithm's share of runs scoring above tau, with its 95% interval band."""
    from utils import robust_stats

    plt = _pyplot()
    taus = np.linspace(0, 1, 51)
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for algorithm, scores in matrices.items():
        profile, low, high = robust_stats.interval(lambda s: robust_stats.performance_profile(s, taus), scores,
                                                   reps=robust_stats.PROFILE_REPS)
        line, = ax.plot(taus, profile, label=algorithm, linewidth=1.5)
        ax.fill_between(taus, low, high, color=line.get_color(), alpha=0.15, linewidth=0)
    ax.set_xlabel("normalised score tau")
    ax.set_ylabel("share of runs with score > tau")
    ax.set_title(f"performance profiles, {title}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, frameon=False, ncol=2)
    return _save(fig, path)


def sample_efficiency(steps: list, curves: dict, path: str) -> str:
    """IQM of the normalised score at each step per algorithm ({algorithm: [(point, low, high) per step]})."""
    import matplotlib.ticker

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for algorithm, estimates in curves.items():
        point, low, high = (np.array(values) for values in zip(*estimates))
        line, = ax.plot(steps, point, label=algorithm, linewidth=1.5)
        ax.fill_between(steps, low, high, color=line.get_color(), alpha=0.15, linewidth=0)
    ax.set_xlabel("t_env (environment steps)")
    ax.set_ylabel("IQM of the normalised score")
    ax.set_title("sample efficiency: IQM and 95% stratified bootstrap interval", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, frameon=False, ncol=2)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(steps_label))
    return _save(fig, path)


def improvement(estimates: dict, path: str, title: str) -> str:
    """Each P(X > Y) ({label: (point, low, high)}) with its 95% interval."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 0.4 * len(estimates) + 1.4), dpi=110)
    for row, (point, low, high) in enumerate(estimates.values()):
        ax.plot([low, high], [row, row], linewidth=6, alpha=0.4, solid_capstyle="butt")
        ax.plot([point], [row], "k|", markersize=12)
    ax.axvline(0.5, color="grey", linewidth=0.8, linestyle="--")
    ax.set_yticks(range(len(estimates)), list(estimates), fontsize=8)
    ax.set_xlim(0, 1)
    ax.set_xlabel("probability of improvement (95% stratified bootstrap interval)")
    ax.set_title(title, fontsize=9)
    return _save(fig, path)


def steps_label(value: float, _position=None) -> str:
    """Axis label of a step count: 0, 500, 20k, 1.5M."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def parse_args(argv: list) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="plot.py", description="Learning curves over seeds per config group.")
    parser.add_argument("paths", nargs="+", help="results/sacred/<map or env> folders or single run folders")
    parser.add_argument("--metric", default="test_return_mean", help="logged stat (default test_return_mean)")
    parser.add_argument("--group-by", default="", help="config keys, comma separated (dotted for nested keys)")
    parser.add_argument("--spread", choices=SPREADS, default="std", help="band: std over seeds, or 95%% CI of the mean")
    parser.add_argument("--source", choices=SOURCES, default="sacred", help="curves from info.json or TensorBoard")
    parser.add_argument("--points", type=int, default=200, help="grid size when runs logged at different t_env")
    parser.add_argument("--include-unfinished", action="store_true", help="also runs not COMPLETED")
    parser.add_argument("--out", help="output prefix (default plots/<folder>_<metric>)")
    parser.add_argument("--title", default="", help="figure title")
    return parser.parse_args(argv)


def main(argv: list) -> int:
    args = parse_args(argv)
    out = args.out or os.path.join("plots", f"{os.path.basename(os.path.normpath(args.paths[0]))}_{args.metric}")
    keys = [key.strip() for key in args.group_by.split(",") if key.strip()]
    try:
        runs = load_runs(args.paths, args.metric, args.source, args.include_unfinished,
                         note=lambda text: print(f"plot.py: {text}"))
        aligned = [align(group, args.points, label) for label, group in group_runs(runs, keys).items()]
    except (ValueError, FileNotFoundError) as error:
        print(f"plot.py: error: {error}", file=sys.stderr)
        return 1
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    plot(aligned, out, args.metric, args.spread, args.title)
    rows = summarise(aligned, args.spread)
    print(write_table(rows, out, args.metric, args.spread), end="")
    print(f"wrote {out}.png, {out}.svg, {out}.csv, {out}.md ({len(runs)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
