"""Seed batches (`seeds=[...]`, run/seed_batch.py): several seeds side by side in one process, each the
run its seed would be alone."""
import os
import re
import signal
import subprocess
import sys
import time

import psutil
import pytest

import plot
from main import build_config
from main_runs import REPO, read_json, run_dir, run_main, start_main, wait_until_training
from run.seed_batch import check_seeds

NAME = "qmix_env=8_adam_td_lambda"  # algs/qmix.yaml's run name
# tests/test_same_learning.py's golden command (30 training steps of QMIX on the null env with 3m's shapes)
# without its seed; learner_threads=1 is what every run of a seed batch trains with.
SMALL = ["--config=qmix", "--env-config=null", "with", "env_args.map_name=3m", "t_max=6000", "batch_size=16",
         "buffer_size=64", "learner_log_interval=1", "test_interval=2000"]
SEEDS = [3, 1, 2]


@pytest.fixture(scope="module")
def batch(tmp_path_factory) -> str:
    """The results folder of `seeds=[3,1,2]` on the small command."""
    results = str(tmp_path_factory.mktemp("batch"))
    result = run_main(*SMALL, f"seeds=[{','.join(map(str, SEEDS))}]", f"local_results_path={results}", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return results


@pytest.fixture(scope="module")
def singles(tmp_path_factory) -> str:
    """The results folder of the single runs seed=3, 1, 2 (run ids 1, 2, 3) of the small command."""
    results = str(tmp_path_factory.mktemp("singles"))
    for seed in SEEDS:
        result = run_main(*SMALL, f"seed={seed}", "learner_threads=1", f"local_results_path={results}", timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
    return results


def run_folders(results: str) -> list:
    """Every sacred run folder of the small command's name under `results`."""
    parent = os.path.dirname(run_dir(results, "3m", NAME, 1))
    return [os.path.join(parent, name) for name in os.listdir(parent) if name.isdigit()]


def runs_by_seed(results: str) -> dict:
    """{seed: run folder} of the sacred runs under `results` (identified by the seed each recorded)."""
    return {read_json(folder, "config.json")["seed"]: folder for folder in run_folders(results)}


def test_each_seed_logs_exactly_what_its_single_run_logs(batch, singles):
    """Every stat of info.json (losses, grad norms, Q-values, targets, returns, epsilon, test returns), at
    the same t_env: measured equal to the last bit, so the tolerance is 0."""
    batched, alone = runs_by_seed(batch), runs_by_seed(singles)
    assert sorted(batched) == sorted(alone) == sorted(SEEDS)
    for seed in SEEDS:
        logged, expected = read_json(batched[seed], "info.json"), read_json(alone[seed], "info.json")
        assert logged.keys() == expected.keys()
        assert len(logged["loss_td"]) == 30 and len(logged["test_return_mean"]) >= 3
        for key in expected:
            assert logged[key] == expected[key], f"seed {seed}: {key}"
    differ = [read_json(batched[seed], "info.json")["loss_td"] for seed in SEEDS]
    assert differ[0] != differ[1] != differ[2]  # the seeds are different runs


def test_each_seed_is_an_ordinary_run_that_records_its_batch(batch):
    folders = runs_by_seed(batch)
    configs = {seed: read_json(folder, "config.json") for seed, folder in folders.items()}
    (batch_id,) = {config["seed_batch"]["id"] for config in configs.values()}
    for index, seed in enumerate(SEEDS):
        config = configs[seed]
        assert config["seed_batch"] == {"id": batch_id, "seeds": SEEDS, "index": index, "size": 3}
        assert config["seeds"] is None and config["learner_threads"] == 1
        assert config["env_args"]["seed"] == seed
        assert read_json(folders[seed], "run.json")["status"] == "COMPLETED"
        output = open(os.path.join(folders[seed], "cout.txt")).read()
        assert f"seed {seed} | Beginning training" in output
        others = [other for other in SEEDS if other != seed]
        assert not any(f"seed {other} |" in output for other in others)  # its own output only
    assert len({config["unique_token"] for config in configs.values()}) == 3


def test_single_runs_record_no_batch(singles):
    config = read_json(runs_by_seed(singles)[1], "config.json")
    assert config["seeds"] is None and config["seed_batch"] == {}


BASE = build_config(["main.py", "--config=qmix", "--env-config=null"])


@pytest.mark.parametrize("value, message", [
    ([], "seeds=[] must be a non-empty list of whole numbers"),
    ([1, 1, 2], "seeds=[1, 1, 2] repeats 1"),
    ([1, 2.5], "must hold whole numbers only"),
    ([1, True], "must hold whole numbers only"),
    ([1, -2], "seeds: -2 is outside numpy's seed range"),
    (list(range(65)), "at most 64"),
])
def test_bad_seeds_are_refused_in_one_line(value, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        check_seeds({**BASE, "seeds": value})


@pytest.mark.parametrize("settings, message", [
    ({"learner": "coma_learner"}, "seeds: learner coma_learner cannot train seeds side by side; the learners "
                                  "that can: nq_learner"),
    ({"seed": 4}, "give either seed=4 (one run) or seeds=[...]"),
    ({"evaluate": True}, "seeds with evaluate=True: not supported"),
    ({"resume": True, "load_step": 500}, "load_step=500 picks one of a single run"),
])
def test_settings_a_batch_cannot_run_are_refused(settings, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        check_seeds({**BASE, "seeds": [1, 2], **settings})


def test_a_refused_batch_is_one_line_exit_2_and_leaves_nothing(tmp_path):
    for value, message in (("[1,1]", "seeds=[1, 1] repeats 1"), ("3", "seeds=3 has the wrong type: expected list")):
        result = run_main(*SMALL, f"seeds={value}", f"local_results_path={tmp_path}")
        assert result.returncode == 2
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert not (tmp_path / "sacred").exists()


def test_a_batch_too_large_for_the_memory_stops_at_its_first_run(tmp_path):
    result = run_main(*SMALL, "seeds=[1,2,3]", "buffer_size=100000000", f"local_results_path={tmp_path}")
    assert result.returncode == 2
    assert "main.py: seed 1: error: the replay buffer needs" in result.stderr
    assert "for 3 seeds in one process" in result.stderr and "run fewer seeds at once" in result.stderr
    assert "seeds 2, 3 not started: the run of seed 1 failed before training" in result.stderr


def start_batch(tmp_path, *extra: str) -> tuple:
    """`seeds=[1,2]` of QMIX on the null env (3m's shapes), started logging to tmp_path/output.txt,
    with the `extra` overrides; returns (process, log path) once both seeds are a second into training."""
    log_path = tmp_path / "output.txt"
    proc = start_main("--config=qmix", "--env-config=null", "with", "env_args.map_name=3m", "seeds=[1,2]",
                      "batch_size=8", "buffer_size=16", "test_interval=100000", f"local_results_path={tmp_path}",
                      *extra, output=log_path)
    wait_until_training(proc, log_path, runs=2, timeout_s=90)
    return proc, log_path


@pytest.mark.parametrize("sig", [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)])  # (one handler)
def test_a_stop_signal_saves_every_seed(tmp_path, sig):
    """Each seed stops at its next iteration, saves a final checkpoint and is recorded INTERRUPTED; the
    process exits with the signal's status, however many times it came."""
    proc, log_path = start_batch(tmp_path, "t_max=10000000", "save_model=True", "save_model_interval=100000000")
    try:
        proc.send_signal(sig)
        if sig == signal.SIGTERM:  # twice, as `timeout` and a signal to its process group do: changes nothing
            time.sleep(0.2)
            proc.send_signal(sig)
        assert proc.wait(timeout=60) == 128 + sig
    finally:
        proc.kill()
    output = log_path.read_text()
    for seed, folder in runs_by_seed(str(tmp_path)).items():
        assert read_json(folder, "run.json")["status"] == "INTERRUPTED"
        token = read_json(folder, "config.json")["unique_token"]
        steps = sorted(int(step) for step in os.listdir(tmp_path / "models" / token))
        assert len(steps) == 2  # the first save and the final one at the stop
        assert (tmp_path / "models" / token / str(steps[1]) / "training_state.pt").exists()
        assert f"seed {seed} | {sig.name} received: stopping at t_env {steps[1]}" in output
        assert f"main.py: seed {seed}: interrupted by {sig.name}" in output
    if sig == signal.SIGINT:
        resume_the_batch(tmp_path)


def resume_the_batch(results) -> None:
    """`seeds=[1,2] resume=True checkpoint_path=<models folder of seed 2>` resumes both seeds, each in its
    own unique_token, from its final checkpoint."""
    stopped = {seed: read_json(folder, "config.json")["unique_token"]
               for seed, folder in runs_by_seed(str(results)).items()}
    t_max = max(max(int(step) for step in os.listdir(results / "models" / token)) for token in stopped.values()) + 400
    result = run_main("--config=qmix", "--env-config=null", "with", "env_args.map_name=3m", "seeds=[1,2]",
                      "resume=True", f"checkpoint_path={results / 'models' / stopped[2]}", f"t_max={t_max}",
                      "batch_size=8", "buffer_size=16", "test_interval=100000", "save_model=True",
                      "save_model_interval=100000000", f"local_results_path={results}", timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    for seed, token in stopped.items():
        assert f"seed {seed} | Resuming from {results / 'models' / token}" in result.stderr
    resumed = [folder for folder in run_folders(str(results)) if read_json(folder, "run.json")["status"] == "COMPLETED"]
    assert sorted(read_json(folder, "config.json")["unique_token"] for folder in resumed) == sorted(stopped.values())


def test_a_killed_env_worker_of_one_seed_is_restarted_and_every_seed_completes(tmp_path):
    """Env workers belong to their seed's runner: one killed worker is restarted (its episode batch played
    again) as in a single run, and both seeds' runs complete with their records."""
    proc, log_path = start_batch(tmp_path, "t_max=3000", "batch_size_run=2", "env_processes=workers")
    try:
        forkserver = next(child for child in psutil.Process(proc.pid).children()
                          if "forkserver" in " ".join(child.cmdline()))
        workers = forkserver.children()
        assert len(workers) == 4  # two envs per seed
        workers[0].kill()
        assert proc.wait(timeout=120) == 0
    finally:
        proc.kill()
    output = log_path.read_text()
    assert output.count("exited unexpectedly") == 1 and "restarted it with seed" in output
    for seed, folder in runs_by_seed(str(tmp_path)).items():
        assert read_json(folder, "run.json")["status"] == "COMPLETED"
        assert read_json(folder, "info.json")["loss_td"]


def test_the_runs_of_a_batch_are_seeds_of_one_setting_for_the_table_and_the_plots(batch):
    folder = os.path.dirname(run_dir(batch, "3m", NAME, 1))
    table = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "results_table.py"), folder, "--mean",
                            "--at", "4000"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert table.returncode == 0, table.stderr
    (row,) = [line for line in table.stdout.splitlines() if line.startswith("| 3m |")]
    assert "| 1, 2, 3 |" in row
    runs = plot.load_runs([folder], "test_return_mean")
    assert [len(group) for group in plot.group_runs(runs, []).values()] == [3]


def test_a_stop_while_a_later_seed_sets_up_saves_the_started_seeds_and_names_the_others(tmp_path):
    """SIGTERM while seed 2 fills its replay buffer (seed 3 not started yet): seeds 1 and 2 stop and save,
    seed 3 is named as not started, the process waits for them all and exits 143."""
    log_path = tmp_path / "output.txt"
    proc = start_main(*SMALL[:4], "seeds=[1,2,3]", "t_max=10000000", "batch_size=256", "buffer_size=256",
                      "test_interval=100000", "save_model=True", "save_model_interval=100000000",
                      f"local_results_path={tmp_path}", output=log_path)
    try:
        deadline = time.monotonic() + 90
        while "seed 2 | Beginning training" not in log_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        proc.kill()
    output = log_path.read_text()
    assert "main.py: seeds 3 not started: stopped by SIGTERM" in output
    runs = runs_by_seed(str(tmp_path))
    assert sorted(runs) == [1, 2]
    for seed, folder in runs.items():
        assert read_json(folder, "run.json")["status"] == "INTERRUPTED"
        token = read_json(folder, "config.json")["unique_token"]
        assert os.listdir(tmp_path / "models" / token)  # its final checkpoint
