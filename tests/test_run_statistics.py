"""scripts/results_table.py --aggregate, --improvement, --figures and --marl-eval on small sets of runs whose
statistics are computed here by hand."""
import json
import os
import subprocess
import sys

from main_runs import REPO
from test_results_table import write_run

TABLE = os.path.join(REPO, "scripts", "results_table.py")


def table(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, TABLE, *args], cwd=REPO, capture_output=True, text=True, timeout=120)


def smac_run(folder, algorithm: str, task: str, seed: int, wins: list[float], episodes: dict | None = None) -> None:
    config = {"env": "sc2", "name": f"{algorithm}_seed{seed}", "seed": seed, "unique_token": f"{algorithm}{task}{seed}",
              "run_kind": "train", "env_args": {"map_name": task, "seed": seed}}
    steps = [1000 * k for k in range(len(wins))]
    info = {"test_battle_won_mean": wins, "test_battle_won_mean_T": steps,
            "test_return_mean": [20 * w for w in wins], "test_return_mean_T": steps}
    if episodes:
        info["test_episodes"] = episodes
    write_run(str(folder / task / f"{algorithm}_seed{seed}"), config, info)


def test_aggregates_and_the_probability_of_improvement_are_the_hand_computed_ones(tmp_path):
    # Scores at t_env 1000 (the second test): a on 3m 0.2 0.4 0.6 and on 8m 0.5 0.7 0.9; b on both 0.1 0.3 0.5.
    for seed, (a3, a8, b) in enumerate([(0.2, 0.5, 0.1), (0.4, 0.7, 0.3), (0.6, 0.9, 0.5)]):
        smac_run(tmp_path, "a", "3m", seed, [0.0, a3])
        smac_run(tmp_path, "a", "8m", seed, [0.0, a8])
        smac_run(tmp_path, "b", "3m", seed, [0.0, b])
        smac_run(tmp_path, "b", "8m", seed, [0.0, b])
    proc = table(str(tmp_path), "--aggregate", "--at", "1000", "--improvement", "a", "b")
    assert proc.returncode == 0, proc.stderr
    rows = {line.split(" | ")[0][2:]: line for line in proc.stdout.splitlines() if line.startswith(("| a | 2", "| b | 2"))}
    # a: the six sorted 0.2 0.4 0.5 0.6 0.7 0.9, the middle four 0.55; task means 0.4 and 0.7: mean 0.55,
    # median 0.55; optimality gap 1 - 0.55.
    assert rows["a"].startswith("| a | 2 | 3 | 0.55 [")
    assert [cell.split(" [")[0] for cell in rows["a"].split(" | ")[3:]] == ["0.55", "0.55", "0.55", "0.45"]
    # Per task: a on 8m 0.5 0.7 0.9, mean 0.7 (IQM of three: their mean); a resample of three 0.5s (or 0.9s)
    # comes 1 time in 27, more often than 2.5%, so the interval runs from 0.5 to 0.9.
    assert "| 8m | a | 3 | 0.70 [0.50, 0.90] | 0.70 [0.50, 0.90] |" in proc.stdout
    # b: 0.1 0.3 0.5 on each task: IQM, mean and median 0.3.
    assert rows["b"].startswith("| b | 2 | 3 | 0.30 [")
    # P(a > b): on 3m, of 9 pairs a wins 6 (0.2 > 0.1; 0.4 > 0.1, 0.3; 0.6 > all), none tie: 6/9; on 8m
    # 0.5 beats two and ties one (2.5), 0.7 and 0.9 beat all three: 8.5/9. (6/9 + 8.5/9) / 2 = 0.81.
    assert "| a | b | 0.81 [" in proc.stdout
    assert "warning" not in proc.stderr


def test_few_runs_warn_and_sets_that_do_not_fit_one_matrix_are_refused(tmp_path):
    smac_run(tmp_path / "two", "a", "3m", 0, [0.0, 0.5])
    smac_run(tmp_path / "two", "a", "3m", 1, [0.0, 0.7])
    proc = table(str(tmp_path / "two"), "--aggregate")
    assert proc.returncode == 0
    assert "warning: a on 3m has 2 run(s): intervals from fewer than 3 runs say little" in proc.stderr
    smac_run(tmp_path / "two", "b", "8m", 0, [0.0, 0.5])
    proc = table(str(tmp_path / "two"), "--aggregate")
    assert proc.returncode == 1
    assert proc.stderr.strip() == ("results_table.py: error: a has no run on 8m: aggregates over tasks need every "
                                   "algorithm on every task; pass the folders of one task set")
    proc = table(str(tmp_path / "two" / "3m"), "--aggregate", "--at", "5000")
    assert proc.stderr.strip() == "results_table.py: error: a on 3m (seed 0) has no test at or after t_env 5,000"


def test_marl_eval_json_holds_each_rounds_episodes_and_figures_are_written(tmp_path):
    episodes = {"T": [0, 1000], "return": [[0.0, 20.0], [20.0, 20.0]], "battle_won": [[0.0, 1.0], [1.0, 1.0]]}
    for seed in range(3):
        smac_run(tmp_path / "runs", "a", "3m", seed, [0.5, 1.0], episodes)
    out = tmp_path / "marl_eval.json"
    figures = tmp_path / "figures"
    proc = table(str(tmp_path / "runs"), "--aggregate", "--marl-eval", str(out), "--figures", str(figures),
                 "--improvement", "a", "a")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert list(data["sc2"]["3m"]["a"]) == ["seed_0", "seed_1", "seed_2"]
    assert data["sc2"]["3m"]["a"]["seed_1"] == {
        "step_0": {"step_count": 0, "return": [0.0, 20.0], "win_rate": [0.0, 1.0]},
        "step_1": {"step_count": 1000, "return": [20.0, 20.0], "win_rate": [1.0, 1.0]}}
    assert sorted(os.listdir(figures)) == ["aggregates.png", "improvement.png", "performance_profile.png",
                                           "sample_efficiency.png"]
    assert all((figures / name).read_bytes().startswith(b"\x89PNG") for name in os.listdir(figures))


def test_runs_from_before_per_episode_records_give_one_value_lists_and_say_so(tmp_path):
    smac_run(tmp_path, "a", "3m", 0, [0.25, 0.75])
    out = tmp_path / "marl_eval.json"
    proc = table(str(tmp_path), "--marl-eval", str(out))
    assert proc.returncode == 0 and proc.stdout == ""
    assert json.loads(out.read_text())["sc2"]["3m"]["a"]["seed_0"]["step_1"] == {
        "step_count": 1000, "return": [15.0], "win_rate": [0.75]}
    assert "note: 1 run(s) kept no per-episode values for some or all test rounds (a on 3m seed 0)" in proc.stderr
    assert "note: 1 run(s) have no absolute_metrics, which marl-eval's tools expect in every run" in proc.stderr


def absolute_evaluation(folder, token: str, won: list[float]) -> None:
    """An absolute-metric evaluation's record (run.py, evaluate_absolute_metric) of the run `token`."""
    info = {"absolute_metric": {"unique_token": token, "t_env": 1000, "selected_by": "test_battle_won_mean",
                                "logged_value": 1.0, "episodes": len(won)},
            "test_battle_won_mean": [sum(won) / len(won)], "test_battle_won_mean_T": [1000],
            "test_episodes": {"T": [1000], "return": [[20.0 * w for w in won]], "battle_won": [won]}}
    write_run(str(folder), {"env": "sc2", "name": "a", "run_kind": "evaluate", "env_args": {"map_name": "3m"}}, info)


def test_the_absolute_metric_scores_runs_by_their_own_evaluations_found_by_token(tmp_path):
    for seed, won in enumerate([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]]):
        smac_run(tmp_path, "a", "3m", seed, [0.5, 1.0])
        absolute_evaluation(tmp_path / "3m" / "a" / "eval" / str(seed), f"a3m{seed}", won)
    out = tmp_path / "marl_eval.json"
    proc = table(str(tmp_path), "--aggregate", "--absolute", "--marl-eval", str(out))
    assert proc.returncode == 0, proc.stderr
    # Scores 0.5, 1.0, 0.0: IQM of three is their mean (int(0.75) = 0 cut), 0.5.
    assert "Score: absolute metric (the best checkpoint re-tested on 10 x test_nepisode episodes)" in proc.stdout
    assert "| a | 1 | 3 | 0.50 [" in proc.stdout
    assert json.loads(out.read_text())["sc2"]["3m"]["a"]["seed_1"]["absolute_metrics"] == {
        "return": [20.0, 20.0], "win_rate": [1.0, 1.0]}
    smac_run(tmp_path, "a", "3m", 3, [0.5, 1.0])  # a fourth seed without one
    proc = table(str(tmp_path), "--aggregate", "--absolute")
    assert proc.stderr.strip() == ("results_table.py: error: a on 3m (seed 3) has no absolute-metric evaluation "
                                   "(evaluate=True absolute_metric=True)")
    absolute_evaluation(tmp_path / "3m" / "a" / "eval" / "again", "a3m0", [1.0])
    proc = table(str(tmp_path), "--aggregate", "--absolute")
    assert "two absolute-metric evaluations of run a3m0" in proc.stderr


def test_rounds_without_per_episode_values_stand_as_their_mean_and_lists_stay_aligned_by_step(tmp_path):
    # A run resumed from a checkpoint of before per-episode values were kept: only its last round has them, and
    # one round's battle_won is missing (null).
    episodes = {"T": [1000, 2000], "return": [[0.0, 20.0], [20.0, 20.0]], "battle_won": [None, [1.0, 1.0]]}
    smac_run(tmp_path / "runs", "a", "3m", 0, [0.25, 0.5, 1.0], episodes)
    out = tmp_path / "marl_eval.json"
    proc = table(str(tmp_path / "runs"), "--marl-eval", str(out))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["sc2"]["3m"]["a"]["seed_0"] == {
        "step_0": {"step_count": 0, "return": [5.0], "win_rate": [0.25]},
        "step_1": {"step_count": 1000, "return": [0.0, 20.0], "win_rate": [0.5]},
        "step_2": {"step_count": 2000, "return": [20.0, 20.0], "win_rate": [1.0, 1.0]}}
    assert "note: 1 run(s) kept no per-episode values for some or all test rounds (a on 3m seed 0)" in proc.stderr


def test_a_run_without_a_test_and_an_evaluation_of_another_map_are_refused(tmp_path):
    smac_run(tmp_path / "one", "a", "3m", 0, [])
    proc = table(str(tmp_path / "one"), "--aggregate")
    assert proc.returncode == 1 and "the a run on 3m (seed 0, a3m0) logged no test yet: leave it out" in proc.stderr
    smac_run(tmp_path / "two", "a", "3m", 0, [0.5, 1.0])
    absolute_evaluation(tmp_path / "two" / "eval", "a3m0", [1.0])
    evaluation = tmp_path / "two" / "eval" / "config.json"
    evaluation.write_text(evaluation.read_text().replace('"3m"', '"8m"'))
    proc = table(str(tmp_path / "two"), "--aggregate", "--absolute")
    assert proc.returncode == 1 and "played 8m: evaluate with the run's own env settings" in proc.stderr
