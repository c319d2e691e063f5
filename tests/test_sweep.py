"""Sweeps: grid expansion and run names, a tiny sweep end to end (locally and on a local Ray
instance), skipping finished runs on a second invocation, resume decisions, shipped results."""
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time

import numpy as np
import pytest

import plot
import sweep
from main import UsageError
from main_runs import REPO, read_json

SWEEP = os.path.join(REPO, "src", "sweep.py")
GROUP = "one_step_matrix_game"
# Tiny runs: these check the wiring, not learning.
TINY = ["t_max=30", "use_cuda=False", "runner=episode", "batch_size_run=1", "rnn_hidden_dim=8",
        "mixing_embed_dim=8", "hypernet_embed=8", "buffer_size=8", "batch_size=4", "test_interval=10",
        "log_interval=10", "runner_log_interval=10", "learner_log_interval=10"]
GRID = ["--config=qmix", "--env-config=one_step_matrix_game", "--grid", "epsilon_anneal_time=20,1000", "--seeds", "2"]
NAMES = ["qmix_eps20_seed0", "qmix_eps20_seed1", "qmix_eps1000_seed0", "qmix_eps1000_seed1"]


def run_sweep(results: str, *argv: str, timeout: int = 150) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SWEEP, *argv, "with", f"local_results_path={results}", *TINY], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def sacred_runs(results: str) -> list:
    group = os.path.join(results, "sacred", GROUP)
    return sorted(os.path.join(name, run_id) for name in os.listdir(group)
                  for run_id in os.listdir(os.path.join(group, name)) if run_id.isdigit())


def manifest(results: str, name: str = "qmix_one_step_matrix_game_eps") -> dict:
    with open(os.path.join(results, "sweeps", f"{name}.json")) as f:
        return json.load(f)


def make_sweep(results: str, *extra: str) -> sweep.Sweep:
    options, main_args, with_tokens = sweep.parse_command_line(
        [*GRID, "--max-parallel", "2", *extra, "with", f"local_results_path={results}", *TINY])
    return sweep.Sweep(options, main_args, with_tokens)


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory):
    results = str(tmp_path_factory.mktemp("sweep"))
    proc = run_sweep(results, *GRID, "--max-parallel", "2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return results, proc.stdout


def test_grid_values_are_parsed_like_sacred_and_multiplied():
    grid = sweep.parse_grid(["lr=0.001,5e-4", "env_args.world_shape=[5,5],[7,7]", "use_layer_norm=True,False"])
    assert grid == {"lr": [0.001, 0.0005], "env_args.world_shape": [[5, 5], [7, 7]],
                    "use_layer_norm": [True, False]}
    runs = sweep.expand(grid, [0, 1], "qmix")
    assert len(runs) == 2 * 2 * 2 * 2
    assert runs[0].name == "qmix_lr0.001_env_args.world_shape=5-5_use_layer_norm=True_seed0"
    assert {run.name for run in runs} == {sweep.run_name("qmix", run.point, run.seed) for run in runs}
    assert sweep.run_name("qmix", {"epsilon_anneal_time": 50000}, 3) == "qmix_eps50000_seed3"


@pytest.mark.parametrize("spec", ["epsilon_anneal_time", "seed=1,2", "lr=", "lr=0.1,,0.2"])
def test_bad_grid_is_one_clear_error(spec):
    with pytest.raises(UsageError):
        sweep.parse_grid([spec])


def test_unknown_grid_key_and_reserved_overrides_are_refused(tmp_path):
    with pytest.raises(UsageError, match="not a config key"):
        sweep.Sweep(*sweep.parse_command_line(["--config=qmix", "--env-config=small_stag_hunt", "--grid", "eps_time=1,2"]))
    with pytest.raises(UsageError, match="sets it for every run"):
        sweep.Sweep(*sweep.parse_command_line(["--config=qmix", "--env-config=small_stag_hunt", "with", "name=x"]))


def test_sweep_runs_every_point_and_seed_as_a_main_run(local_sweep):
    results, stdout = local_sweep
    assert sacred_runs(results) == [os.path.join(name, "1") for name in sorted(NAMES)]
    for name in NAMES:
        folder = os.path.join(results, "sacred", GROUP, name, "1")
        config = read_json(folder, "config.json")
        assert config["name"] == name
        assert config["seed"] == int(name[-1])
        assert config["epsilon_anneal_time"] == int(name.split("_")[1][3:])
        assert (config["save_model"], config["use_tensorboard"], config["t_max"]) == (True, True, 30)
        assert read_json(folder, "run.json")["status"] == "COMPLETED"
    tokens = os.listdir(os.path.join(results, "tb_logs"))
    assert sorted(token.split("__")[0] for token in tokens) == sorted(NAMES)  # TensorBoard names say the config
    data = manifest(results)
    assert [run["name"] for run in data["runs"]] == NAMES
    assert all(run["state"] == "completed" and run["returncode"] == 0 for run in data["runs"])
    assert data["grid"] == {"epsilon_anneal_time": [20, 1000]} and data["seeds"] == [0, 1]
    assert "done 4/4" in stdout and "left 0" in stdout


# On a local Ray instance (the executor takes main.py processes as they come, batched or not; the local
# executor runs the sweep of local_sweep); on the local executor in the slow set.
@pytest.mark.parametrize("executor", [["--ray", "local"], pytest.param([], marks=pytest.mark.slow)])
def test_batch_seeds_runs_each_points_seeds_in_one_process_as_the_same_runs(tmp_path, executor):
    """--batch-seeds: one main.py per point (seeds=[0,1]), whose runs are recorded, named and found again
    exactly as the runs of a sweep without it."""
    if executor:
        pytest.importorskip("ray")
    results = str(tmp_path)
    proc = run_sweep(results, *GRID, "--batch-seeds", "--max-parallel", "2", *executor, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert manifest(results)["executor"].startswith("ray:local" if executor else "local")
    assert sacred_runs(results) == [os.path.join(name, "1") for name in sorted(NAMES)]
    batch_ids = set()
    for name in NAMES:
        folder = os.path.join(results, "sacred", GROUP, name, "1")
        config = read_json(folder, "config.json")
        assert (config["name"], config["seed"]) == (name, int(name[-1]))
        assert config["seed_batch"]["seeds"] == [0, 1] and config["seed_batch"]["index"] == int(name[-1])
        batch_ids.add(config["seed_batch"]["id"])
        assert read_json(folder, "run.json")["status"] == "COMPLETED"
    assert len(batch_ids) == 2  # one process per point
    assert "starting: qmix_eps20_seed0, qmix_eps20_seed1 (one process, seeds side by side)" in proc.stdout
    assert all(run["state"] == "completed" for run in manifest(results)["runs"])
    again = run_sweep(results, *GRID, "--batch-seeds", "--max-parallel", "2", *executor, timeout=240)
    assert again.returncode == 0 and "0 to run" in again.stdout


def test_plot_data_of_the_sweep_match_the_logged_values(local_sweep):
    results, _ = local_sweep
    runs = plot.load_runs([os.path.join(results, "sacred", GROUP)], "return_mean")
    groups = plot.group_runs(runs, ["epsilon_anneal_time"])
    assert list(groups) == ["epsilon_anneal_time=20", "epsilon_anneal_time=1000"]
    aligned = [plot.align(group, 50, label) for label, group in groups.items()]
    rows = plot.summarise(aligned)
    for group, row, eps in zip(aligned, rows, (20, 1000)):
        infos = [read_json(os.path.join(results, "sacred", GROUP, f"qmix_eps{eps}_seed{seed}", "1"), "info.json")
                 for seed in (0, 1)]
        t0, t1 = (np.array(info["return_mean_T"], dtype=float) for info in infos)
        v0, v1 = (np.array(info["return_mean"]) for info in infos)
        assert group.t[0] == max(t0[0], t1[0]) and group.t[-1] == min(t0[-1], t1[-1])
        np.testing.assert_allclose(group.values, [np.interp(group.t, t0, v0), np.interp(group.t, t1, v1)])
        assert row["seeds"] == 2
        assert row["final_mean"] == pytest.approx((np.interp(group.t[-1], t0, v0) + np.interp(group.t[-1], t1, v1)) / 2)
        assert row["best_mean"] == pytest.approx(group.values.mean(axis=0).max())


def test_second_invocation_skips_finished_runs(local_sweep):
    results, _ = local_sweep
    before = sacred_runs(results)
    proc = run_sweep(results, *GRID, "--max-parallel", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sacred_runs(results) == before
    assert [run["state"] for run in manifest(results)["runs"]] == ["skipped"] * 4
    assert "0 to run" in proc.stdout and "skipped 4" in proc.stdout


def test_interrupted_runs_are_resumed_and_live_ones_left_alone(local_sweep, tmp_path):
    results, _ = local_sweep
    # A copy of one finished run, edited to look interrupted, in a results folder of its own.
    copy = str(tmp_path / "results")
    name = "qmix_eps20_seed0"
    for part in (os.path.join("sacred", GROUP, name), "models", "tb_logs"):
        shutil.copytree(os.path.join(results, part), os.path.join(copy, part))
    run_json = os.path.join(copy, "sacred", GROUP, name, "1", "run.json")
    info = read_json(os.path.dirname(run_json), "run.json")
    this = make_sweep(copy)
    run = next(run for run in this.runs if run.name == name)
    for status, heartbeat, expected in [("INTERRUPTED", time.time(), "resume"), ("FAILED", time.time(), "resume"),
                                        ("RUNNING", time.time() - 3600, "resume"), ("RUNNING", time.time(), "leave")]:
        info.update(status=status, heartbeat=time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(heartbeat)))
        with open(run_json, "w") as f:
            json.dump(info, f)
        if expected == "resume" and not this.resume_supported:
            expected = "restart"  # main.py has no resume option yet: the run starts again
        assert this.classify(run) == expected, status
    checkpoint = run.checkpoint  # found by the unique_token the interrupted run recorded in its config.json
    assert checkpoint == os.path.join(copy, "models", read_json(os.path.dirname(run_json), "config.json")["unique_token"])
    assert this.argv(run, checkpoint)[-2:] == [f"checkpoint_path='{checkpoint}'", "resume=True"]
    other = next(run for run in this.runs if run.name == "qmix_eps20_seed1")
    assert this.classify(other) == "start"


def test_shipped_run_is_merged_with_the_next_free_run_id(local_sweep, tmp_path):
    """What a Ray worker ships back (its results folder as .tar.gz) lands in the local layout."""
    results, _ = local_sweep
    name = "qmix_eps20_seed1"
    worker = tmp_path / "worker"
    shutil.copytree(os.path.join(results, "sacred", GROUP, name), worker / "sacred" / GROUP / name)
    token = read_json(os.path.join(results, "sacred", GROUP, name, "1"), "config.json")["unique_token"]
    shipped_token = token.replace("__2026", "__2099")  # as if a later run on the worker
    config_path = worker / "sacred" / GROUP / name / "1" / "config.json"
    config = json.loads(config_path.read_text())
    config["unique_token"] = shipped_token
    config_path.write_text(json.dumps(config))
    shutil.copytree(os.path.join(results, "tb_logs", token), worker / "tb_logs" / shipped_token)
    shutil.copytree(os.path.join(results, "models", token), worker / "models" / shipped_token)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(str(worker), arcname=".")
    target = str(tmp_path / "local")
    shutil.copytree(os.path.join(results, "sacred"), os.path.join(target, "sacred"))
    (merged,) = sweep.merge_shipped(buffer.getvalue(), target)
    assert merged == os.path.join(target, "sacred", GROUP, name, "2")
    assert read_json(merged, "info.json") == read_json(os.path.join(results, "sacred", GROUP, name, "1"), "info.json")
    assert os.listdir(os.path.join(target, "tb_logs")) == [shipped_token]
    found = sweep.matching_runs(os.path.join(target, "sacred", GROUP, name), {"name": name})
    assert sweep.saved_models(target, found) == os.path.join(target, "models", shipped_token)


def test_interrupted_run_is_resumed_end_to_end(local_sweep, tmp_path):
    results, _ = local_sweep
    this = make_sweep(results)
    if not this.resume_supported:
        pytest.skip("main.py has no resume option")
    copy = str(tmp_path / "results")
    shutil.copytree(results, copy)
    name = "qmix_eps1000_seed1"
    run_json = os.path.join(copy, "sacred", GROUP, name, "1", "run.json")
    info = read_json(os.path.dirname(run_json), "run.json")
    info["status"] = "INTERRUPTED"
    with open(run_json, "w") as f:
        json.dump(info, f)
    proc = run_sweep(copy, *GRID, "--max-parallel", "2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"resuming from {os.path.join(copy, 'models', name)}__" in proc.stdout
    log = open(os.path.join(copy, "sweeps", "qmix_one_step_matrix_game_eps", f"{name}.log")).read()
    assert log.count("=== ") == 2 and "sweep start:" in log and "sweep resume:" in log  # the log grows
    resumed = os.path.join(copy, "sacred", GROUP, name, "2")
    assert read_json(resumed, "run.json")["status"] == "COMPLETED"
    assert read_json(resumed, "config.json")["resume"] is True
    # the resumed run continues the interrupted one's unique_token and curves
    token = read_json(os.path.dirname(run_json), "config.json")["unique_token"]
    assert read_json(resumed, "config.json")["unique_token"] == token
    assert [t for t in os.listdir(os.path.join(copy, "tb_logs")) if t.startswith(f"{name}__")] == [token]
    assert read_json(resumed, "info.json")["test_return_mean_T"][:3] == \
        read_json(os.path.dirname(run_json), "info.json")["test_return_mean_T"][:3]
    states = {run["name"]: (run["state"], run["action"]) for run in manifest(copy)["runs"]}
    assert states.pop(name) == ("completed", "resume")
    assert set(states.values()) == {("skipped", "skip")}


def test_the_same_grid_with_other_fixed_overrides_is_another_sweep(local_sweep):
    results, _ = local_sweep
    with pytest.raises(UsageError, match="sweep 'qmix_one_step_matrix_game_eps' already exists .* with other "
                                         "fixed_overrides .* give --name NEW to start another sweep"):
        sweep.Sweep(*sweep.parse_command_line([*GRID, "with", f"local_results_path={results}", *TINY, "t_max=40"]))
    other = sweep.Sweep(*sweep.parse_command_line([*GRID, "--name", "longer", "with", f"local_results_path={results}",
                                                   *TINY, "t_max=40"]))
    assert other.history == [] and {other.classify(run) for run in other.runs} == {"start"}  # nothing reused


def test_the_manifest_keeps_the_history_of_its_commands(local_sweep):
    results, _ = local_sweep
    history = manifest(results)["history"]
    assert len(history) >= 1 and history[0]["outcome"] == "completed" and history[0]["actions"] == {"start": 4}
    assert all("ended" in attempt and attempt["command"] for attempt in history)


def test_progress_shows_each_running_runs_t_env_and_estimates_the_time_left(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("=== first attempt\n t_env: 900 / 1000\n=== second attempt\n[INFO] t_env: 250 / 1000\n")
    assert sweep.run_fraction(str(log)) == 0.25
    log.write_text("=== an attempt without a test yet\n")
    assert sweep.run_fraction(str(log)) is None
    progress = sweep.Progress(total=3, max_parallel=1)
    running = sweep.SweepRun("a", {}, 0, state="running", log=str(tmp_path / "a.log"), started=time.time() - 100)
    (tmp_path / "a.log").write_text("=== start\nt_env: 500 / 2000\n")
    line = progress.line([running, sweep.SweepRun("b", {}, 1), sweep.SweepRun("c", {}, 2)])
    assert "running 1 [a 25%]" in line
    # 100 s for a quarter: a run takes ~400 s; 300 s left of it, then 2 more one at a time
    assert "time left 0:18:" in line


def test_a_stopped_sweep_records_its_runs_as_interrupted(tmp_path):
    results = str(tmp_path)
    proc = subprocess.Popen([sys.executable, SWEEP, "--config=qmix", "--env-config=one_step_matrix_game", "--grid",
                             "epsilon_anneal_time=20", "with", f"local_results_path={results}",
                             *[token for token in TINY if not token.startswith("t_max")], "t_max=1000000"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    log = os.path.join(results, "sweeps", "qmix_one_step_matrix_game_eps", "qmix_eps20_seed0.log")
    while time.time() < deadline and sweep.run_fraction(log) is None:
        time.sleep(0.5)
    proc.terminate()
    assert proc.wait(timeout=150) == 130
    data = manifest(results)
    assert [run["state"] for run in data["runs"]] == ["interrupted"]
    assert data["history"][-1]["outcome"] == "interrupted"
