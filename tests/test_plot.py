"""plot.py: runs read from sacred folders (and TensorBoard events), aligned on t_env, summarised
per group; the expected numbers are computed here from the info.json files themselves."""
import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import plot
from main_runs import REPO

PLOT = os.path.join(REPO, "src", "plot.py")
METRIC = "test_return_mean"


def write_run(results: str, name: str, run_id: int, eps: int, seed: int, t: list, values: list,
              status: str = "COMPLETED", **config_values) -> str:
    """A sacred run folder as main.py writes it (only the files plot.py reads)."""
    folder = os.path.join(results, "sacred", "small_stag_hunt", name, str(run_id))
    os.makedirs(folder)
    config = {"name": name, "seed": seed, "epsilon_anneal_time": eps, "env": "small_stag_hunt",
              "env_args": {"map_name": "small_stag_hunt", "seed": seed}, "local_results_path": results,
              "unique_token": f"{name}__2026-11-30_01-00-0{run_id}_abcdef", "use_tensorboard": True,
              "run_kind": "train", "t_max": 400, **config_values}
    files = {"config.json": config,
             "run.json": {"status": status, "start_time": "2026-11-30T01:00:00.000000"},
             "info.json": {METRIC: values, f"{METRIC}_T": t, "loss_td": [1.0], "loss_td_T": [5]}}
    for filename, content in files.items():
        with open(os.path.join(folder, filename), "w") as f:
            json.dump(content, f)
    return folder


@pytest.fixture()
def results(tmp_path):
    """Two groups: eps 5000 logged at the same steps by all seeds, eps 20000 at different steps;
    plus an interrupted run that must not count."""
    rng = np.random.default_rng(0)
    root = str(tmp_path)
    for seed in range(3):
        write_run(root, f"qmix_eps5000_seed{seed}", 1, 5000, seed, [0, 100, 200, 300],
                  rng.uniform(0, 10, 4).round(3).tolist())
        t = sorted({0, *rng.integers(10, 390, 5).tolist(), 400 + 7 * seed})
        write_run(root, f"qmix_eps20000_seed{seed}", 1, 20000, seed, t, rng.uniform(0, 10, len(t)).round(3).tolist())
    write_run(root, "qmix_eps5000_seed0", 2, 5000, 0, [0, 100], [50.0, 60.0], status="INTERRUPTED")
    return root


def logged(folder: str) -> tuple:
    with open(os.path.join(folder, "info.json")) as f:
        info = json.load(f)
    return np.array(info[f"{METRIC}_T"], dtype=float), np.array(info[METRIC])


def folders(results: str, eps: int) -> list:
    base = os.path.join(results, "sacred", "small_stag_hunt")
    return [os.path.join(base, f"qmix_eps{eps}_seed{seed}", "1") for seed in range(3)]


def test_runs_are_grouped_and_aligned_on_t_env(results):
    runs = plot.load_runs([os.path.join(results, "sacred", "small_stag_hunt")], METRIC)
    assert len(runs) == 6  # the INTERRUPTED run is left out
    groups = plot.group_runs(runs, ["epsilon_anneal_time"])
    assert list(groups) == ["epsilon_anneal_time=5000", "epsilon_anneal_time=20000"]  # numeric order

    same = plot.align(groups["epsilon_anneal_time=5000"], n_points=50)
    expected = np.stack([logged(folder)[1] for folder in folders(results, 5000)])
    np.testing.assert_array_equal(same.t, [0, 100, 200, 300])  # shared steps are kept as they are
    np.testing.assert_allclose(same.values, expected)

    mixed = plot.align(groups["epsilon_anneal_time=20000"], n_points=50)
    curves = [logged(folder) for folder in folders(results, 20000)]
    assert mixed.t[0] == 0 and mixed.t[-1] == min(t[-1] for t, _ in curves) and len(mixed.t) == 50
    for row, (t, v) in zip(mixed.values, curves):
        for i in (0, 17, 49):  # linear interpolation between the two logged neighbours
            j = np.searchsorted(t, mixed.t[i], side="right") - 1
            j = min(j, len(t) - 2)
            w = (mixed.t[i] - t[j]) / (t[j + 1] - t[j])
            assert row[i] == pytest.approx(v[j] + w * (v[j + 1] - v[j]))


def test_summary_has_final_and_best_per_group(results):
    runs = plot.load_runs([os.path.join(results, "sacred")], METRIC)
    aligned = [plot.align(group, 50, label) for label, group in plot.group_runs(runs, ["epsilon_anneal_time"]).items()]
    rows = plot.summarise(aligned, "std")
    curves = [logged(folder) for folder in folders(results, 5000)]
    finals = np.array([v[-1] for _, v in curves])  # same steps: each run's last logged value
    assert (rows[0]["seeds"], rows[0]["t_env_end"]) == (3, 300)
    assert rows[0]["final_mean"] == pytest.approx(finals.mean())
    assert rows[0]["final_spread"] == pytest.approx(finals.std())
    curves = [logged(folder) for folder in folders(results, 20000)]
    end = min(t[-1] for t, _ in curves)  # different steps: the values at the last common step
    finals = np.array([np.interp(end, t, v) for t, v in curves])
    assert (rows[1]["seeds"], rows[1]["t_env_end"]) == (3, end)
    assert rows[1]["final_mean"] == pytest.approx(finals.mean())
    assert rows[1]["final_spread"] == pytest.approx(finals.std())
    curves = np.stack([logged(folder)[1] for folder in folders(results, 5000)]).mean(axis=0)
    assert rows[0]["best_mean"] == pytest.approx(curves.max())
    assert rows[0]["best_t_env"] == [0, 100, 200, 300][int(curves.argmax())]


def test_ci95_uses_student_t():
    values = np.array([[1.0, 2.0], [3.0, 2.0], [5.0, 2.0]])  # [runs, points]
    np.testing.assert_allclose(plot.spread(values, "ci95"), [4.303 * 2.0 / np.sqrt(3), 0.0])
    np.testing.assert_allclose(plot.spread(values, "std"), [np.std([1, 3, 5]), 0.0])


def test_command_writes_figures_and_tables(results, tmp_path):
    out = str(tmp_path / "out" / "eps")
    proc = subprocess.run([sys.executable, PLOT, os.path.join(results, "sacred", "small_stag_hunt"), "--metric", METRIC,
                           "--group-by", "epsilon_anneal_time", "--spread", "ci95", "--out", out],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for ext in ("png", "svg", "csv", "md"):
        assert os.path.getsize(f"{out}.{ext}") > 0
    with open(f"{out}.csv") as f:
        rows = list(csv.DictReader(f))
    finals = [logged(folder)[1][-1] for folder in folders(results, 5000)]
    assert rows[0]["group"] == "epsilon_anneal_time=5000" and rows[0]["seeds"] == "3"
    assert float(rows[0]["final_mean"]) == pytest.approx(np.mean(finals))
    assert float(rows[0]["final_spread"]) == pytest.approx(4.303 * np.std(finals, ddof=1) / np.sqrt(3))
    assert "| epsilon_anneal_time=20000 | 3 |" in open(f"{out}.md").read()


def test_tensorboard_source_reads_the_events_of_the_token_the_run_recorded(results):
    from tensorboardX import SummaryWriter
    name = "qmix_eps5000_seed1"
    for token, scale in ((f"{name}__2026-11-30_01-00-01_abcdef", 1.0), (f"{name}__2026-11-30_01-00-02_abcdef", 9.0)):
        writer = SummaryWriter(logdir=os.path.join(results, "tb_logs", token))  # the second is another run's
        for step, value in [(0, 1.5), (150, 2.5), (300, 4.0)]:
            writer.add_scalar(METRIC, scale * value, step)
        writer.close()
    (run,) = plot.load_runs([os.path.join(results, "sacred", "small_stag_hunt", name)], METRIC, source="tb")
    np.testing.assert_array_equal(run.t, [0, 150, 300])
    np.testing.assert_allclose(run.values, [1.5, 2.5, 4.0])


@pytest.mark.parametrize("config_values, message", [
    ({"unique_token": None}, "records no unique_token"),
    ({"use_tensorboard": False}, "wrote no TensorBoard events \\(use_tensorboard=False\\)"),
    ({}, "its TensorBoard events .* are missing"),
])
def test_tensorboard_source_refuses_rather_than_guesses(tmp_path, config_values, message):
    folder = write_run(str(tmp_path), "qmix_seed0", 1, 5000, 0, [0, 1], [1.0, 2.0], **config_values)
    with pytest.raises(ValueError, match=message):
        plot.load_runs([folder], METRIC, source="tb")


def test_evaluation_runs_are_left_out(results):
    write_run(results, "qmix_eps5000_seed0/eval", 1, 5000, 0, [400], [9.0], run_kind="evaluate")
    notes = []
    runs = plot.load_runs([os.path.join(results, "sacred")], METRIC, note=notes.append)
    assert len(runs) == 6 and notes == ["left out 1 evaluation run(s) (run_kind evaluate)"]


def test_runs_of_other_settings_are_never_pooled(results):
    write_run(results, "qmix_eps5000_seed0", 3, 5000, 0, [0, 100, 200, 300], [1.0, 2.0, 3.0, 4.0], t_max=800)
    runs = plot.load_runs([os.path.join(results, "sacred")], METRIC)
    with pytest.raises(ValueError, match="the runs of group 'epsilon_anneal_time=5000' differ in t_max "
                                         "\\(400 in .*, 800 in .*\\): add it to --group-by"):
        plot.group_runs(runs, ["epsilon_anneal_time"])
    groups = plot.group_runs(runs, ["epsilon_anneal_time", "t_max"])
    assert [len(group) for group in groups.values()] == [3, 1, 3]
    # Without --group-by, the settings that differ label the groups.
    assert list(plot.group_runs(runs, [])) == ["epsilon_anneal_time=5000, t_max=400",
                                                "epsilon_anneal_time=5000, t_max=800",
                                                "epsilon_anneal_time=20000, t_max=400"]


@pytest.mark.parametrize("argv, message", [
    (["--metric", "no_such_stat"], "logged 'no_such_stat'; metrics logged: loss_td, test_return_mean"),
    (["--group-by", "no_such_key"], "--group-by key 'no_such_key' is not in the config"),
])
def test_bad_metric_or_key_is_one_line(results, argv, message):
    proc = subprocess.run([sys.executable, PLOT, os.path.join(results, "sacred"), *argv, "--out",
                           os.path.join(results, "p")], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_sacred_and_tensorboard_give_the_same_curves_for_real_runs(tmp_path):
    """main.py runs in one folder: two seeds with TensorBoard, one without, and an evaluation of the first."""
    from main_runs import run_main
    common = ["--config=qmix", "--env-config=one_step_matrix_game", "with", f"local_results_path={tmp_path}",
              "use_cuda=False", "rnn_hidden_dim=8", "mixing_embed_dim=8", "hypernet_embed=8", "buffer_size=8",
              "batch_size=4", "batch_size_run=2", "test_interval=20", "test_nepisode=2", "learner_log_interval=20",
              "t_max=60"]
    for extra in (["seed=1", "use_tensorboard=True", "save_model=True"], ["seed=2", "use_tensorboard=True"],
                  ["seed=3"]):
        assert run_main(*common, *extra).returncode == 0
    base = tmp_path / "sacred" / "one_step_matrix_game" / "qmix_env=8_adam_td_lambda"
    token = json.load(open(base / "1" / "config.json"))["unique_token"]
    evaluation = run_main(*common, "evaluate=True", f"checkpoint_path={tmp_path / 'models' / token}")
    assert evaluation.returncode == 0 and os.path.isdir(base / "eval" / "1")

    for metric in ("test_return_mean", "loss_td"):
        sacred = plot.load_runs([str(base / "1"), str(base / "2")], metric)
        tb = plot.load_runs([str(base / "1"), str(base / "2")], metric, source="tb")
        for a, b in zip(sacred, tb, strict=True):
            np.testing.assert_array_equal(a.t, b.t)
            np.testing.assert_allclose(a.values, b.values, rtol=1e-6)
    runs = plot.load_runs([str(tmp_path / "sacred")], "test_return_mean")  # the evaluation is left out
    assert len(runs) == 3 and list(plot.group_runs(runs, [])) == ["qmix_env=8_adam_td_lambda"]
    with pytest.raises(ValueError, match="wrote no TensorBoard events"):
        plot.load_runs([str(tmp_path / "sacred")], "test_return_mean", source="tb")
