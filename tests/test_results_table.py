"""scripts/results_table.py: one row per run found under the given folders, with its kind and the test
metric its env logs."""
import json
import os
import subprocess
import sys

import pytest

from main_runs import REPO

TABLE = os.path.join(REPO, "scripts", "results_table.py")


def write_run(folder: str, config: dict, info: dict, run: dict | None = None) -> None:
    os.makedirs(folder)
    files = {"config.json": config, "info.json": info,
             "run.json": run or {"status": "COMPLETED", "start_time": "2026-12-01T10:00:00",
                                 "stop_time": "2026-12-01T10:06:00"}}
    for name, content in files.items():
        with open(os.path.join(folder, name), "w") as f:
            json.dump(content, f)


def table(*paths: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, TABLE, *paths], cwd=REPO, capture_output=True, text=True, timeout=60)


def test_a_map_folder_lists_training_and_evaluation_runs_apart(tmp_path):
    smac = {"env": "sc2", "env_args": {"map_name": "3m", "backend": "builtin"}, "evaluate": False, "save_replay": False}
    base = tmp_path / "sacred" / "3m" / "qmix"
    write_run(str(base / "1"), {**smac, "run_kind": "train"},
              {"test_battle_won_mean": [0.2, 0.95, 1.0], "test_battle_won_mean_T": [0, 1000, 2000]})
    write_run(str(base / "eval" / "1"), {**smac, "evaluate": True}, {"test_battle_won_mean": [0.5],
                                                                     "test_battle_won_mean_T": [2000]})
    proc = table(str(tmp_path / "sacred" / "3m"))
    assert proc.returncode == 0, proc.stderr
    rows = proc.stdout.strip().splitlines()[2:]
    assert rows[0].startswith(f"| {base / '1'} | train | 3m | builtin | float32 | 2,000 | 6.0 min | "
                              f"test_battle_won_mean | 0.72 | 1.00 | 1,000 | completed |")
    assert rows[1].startswith(f"| {base / 'eval' / '1'} | evaluate | 3m |")  # kind from the config of older runs


def test_envs_without_win_rates_show_returns_and_unfinished_runs_say_so(tmp_path):
    write_run(str(tmp_path / "a"), {"env": "small_stag_hunt", "env_args": {}}, {"test_return_mean": [3.0, 8.0],
                                                                                "test_return_mean_T": [0, 500]})
    write_run(str(tmp_path / "b"), {"env": "small_stag_hunt", "env_args": {}}, {"loss_td": [1.0], "loss_td_T": [9]})
    proc = table(str(tmp_path))
    rows = proc.stdout.strip().splitlines()[2:]
    assert "| test_return_mean | 5.50 | 8.00 | - |" in rows[0]
    assert "no test finished yet" in rows[1]


def test_a_missing_path_is_one_line(tmp_path):
    proc = table(str(tmp_path / "missing"))
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1
    assert "does not exist" in proc.stderr


def smacv2_run(map_name: str, seed: int, token: str) -> dict:
    return {"env": "sc2v2", "name": "qmix_env=8_adam_td_lambda", "seed": seed, "unique_token": token,
            "run_kind": "train", "env_args": {"map_name": map_name, "backend": "builtin", "seed": seed}}


def sacred_run(start: str, status: str, commit: str, dirty: bool) -> dict:
    """run.json as sacred writes it (its repositories list repeats the one repository per source file)."""
    return {"status": status, "start_time": start, "heartbeat": start,
            "experiment": {"repositories": [{"commit": commit, "dirty": dirty, "url": "git://repo"}] * 3}}


def curve(steps: list, values: list) -> dict:
    return {"test_battle_won_mean": values, "test_battle_won_mean_T": steps, "loss_td": [1.0], "loss_td_T": [9]}


def test_at_gives_each_runs_test_at_the_first_t_env_reaching_each_step(tmp_path):
    """docs/results/smacv2-like records (config.json, info.json, metrics.json, run.json) in folders whose
    names say nothing or mislead: runs are told apart by their config.json."""
    steps = [0, 99_000, 100_400, 150_000, 201_000]
    write_run(str(tmp_path / "zerg" / "a"), smacv2_run("protoss_5_vs_5", 2, "qmix_builtin__x_1"),
              curve(steps, [0.0, 0.1, 0.2, 0.3, 0.4]),
              sacred_run("2026-12-01T10:00:00", "COMPLETED", "abcdef0123", False))
    # One run in two folders: interrupted at 150,000, resumed (same unique_token) from its checkpoint at
    # 100,400, its new folder starting with the curve up to there; the newest folder gives the values.
    token = "qmix_builtin__x_2"
    write_run(str(tmp_path / "zerg" / "b"), smacv2_run("zerg_5_vs_5", 1, token), curve(steps[:4], [0.0, 0.5, 0.6, 0.7]),
              sacred_run("2026-12-01T09:00:00", "INTERRUPTED", "1111111aaa", True))
    write_run(str(tmp_path / "c"), smacv2_run("zerg_5_vs_5", 1, token),
              curve([0, 99_000, 100_400, 201_000, 1_000_300], [0.0, 0.5, 0.6, 0.8, 0.9]),
              sacred_run("2026-12-01T11:00:00", "COMPLETED", "2222222bbb", False))
    for folder in ("zerg/a", "zerg/b", "c"):
        (tmp_path / folder / "metrics.json").write_text("{}")
    evaluation = {**smacv2_run("zerg_5_vs_5", 1, "qmix_builtin__x_3"), "run_kind": "evaluate"}
    write_run(str(tmp_path / "eval"), evaluation, curve([1_000_300], [1.0]))
    proc = table(str(tmp_path), "--at", "100000", "200000", "1000000")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0].endswith("| test metric | t_env 100,000 | t_env 200,000 | t_env 1,000,000 | last test | status |")
    assert lines[1] == "|---" * 12 + "|"
    assert lines[2:] == [
        "| protoss_5_vs_5 | qmix_env=8_adam_td_lambda | 2 | qmix_builtin__x_1 | abcdef0 | - | test_battle_won_mean | "
        "0.20 | 0.40 | - | 201,000 | completed |",
        "| zerg_5_vs_5 | qmix_env=8_adam_td_lambda | 1 | qmix_builtin__x_2 | 1111111 (dirty), 2222222 | - | "
        "test_battle_won_mean | 0.60 | 0.80 | 0.90 | 1,000,300 | completed |"]


def test_at_shows_the_simulator_digest_a_kept_log_records_and_returns_where_no_win_rate_is_logged(tmp_path):
    write_run(str(tmp_path / "a"), smacv2_run("terran_5_vs_5", 0, "t1"), curve([0, 60_000], [0.0, 0.25]))
    (tmp_path / "a" / "cout.txt").write_text("[INFO] my_main SMAC engine: builtin, sources sha256 0123abcd4567 (...)\n")
    write_run(str(tmp_path / "b"), {"env": "small_stag_hunt", "env_args": {}, "name": "iql", "seed": 4,
                                    "unique_token": "t2"},
              {"test_return_mean": [3.0, 8.0], "test_return_mean_T": [0, 500]})
    write_run(str(tmp_path / "c"), smacv2_run("zerg_5_vs_5", 0, "t3"), {"loss_td": [1.0], "loss_td_T": [9]})
    rows = table(str(tmp_path), "--at", "50000").stdout.strip().splitlines()[2:]
    assert rows == ["| small_stag_hunt | iql | 4 | t2 | - | - | test_return_mean | - | 500 | completed |",
                    "| terran_5_vs_5 | qmix_env=8_adam_td_lambda | 0 | t1 | - | 0123abcd4567 | test_battle_won_mean | "
                    "0.25 | 60,000 | completed |",
                    "| zerg_5_vs_5 | qmix_env=8_adam_td_lambda | 0 | t3 | - | - | no test yet | - | - | completed |"]


def zoo_run(seed: int, **setting) -> dict:
    """A src/sweep.py run's config.json: its name ends in _seed<seed>."""
    return {"env": "sc2", "name": f"qatten_seed{seed}", "seed": seed, "unique_token": f"qatten_builtin__x_{seed}",
            "run_kind": "train", "lr": 0.001, **setting,
            "env_args": {"map_name": "3m", "backend": "builtin", "seed": seed}}


def test_mean_pools_the_seeds_of_one_setting_and_shows_each(tmp_path):
    write_run(str(tmp_path / "a"), zoo_run(0), curve([0, 50_100, 100_200], [0.0, 0.5, 0.9]))
    write_run(str(tmp_path / "b"), zoo_run(1), curve([0, 50_100, 100_200], [0.0, 0.25, 0.7]))
    write_run(str(tmp_path / "c"), zoo_run(2), curve([0, 50_100], [0.0, 0.3]))  # stopped before 100k
    proc = table(str(tmp_path), "--at", "50000", "100000", "--mean")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[2] == "| 3m | qatten | 0, 1, 2 | 0.35 (0.50, 0.25, 0.30) | 0.80 (0.90, 0.70, -) |"


def test_mean_refuses_to_pool_runs_of_different_settings(tmp_path):
    write_run(str(tmp_path / "a"), zoo_run(0), curve([0, 50_100], [0.0, 0.5]))
    write_run(str(tmp_path / "b"), zoo_run(1, lr=0.0005), curve([0, 50_100], [0.0, 0.25]))
    proc = table(str(tmp_path), "--at", "50000", "--mean")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip() == ("results_table.py: error: the qatten runs on 3m differ in lr (0.001 against 0.0005): "
                                   "pass their folders separately")
    assert table(str(tmp_path), "--mean").returncode == 2  # --mean needs --at


def mean_of(root, *configs) -> subprocess.CompletedProcess:
    """The --mean table at 50k of runs with these configs, written under root."""
    for i, config in enumerate(configs):
        write_run(str(root / str(i)), config, curve([0, 50_100], [0.0, 0.5 - 0.25 * i]))
    return table(str(root), "--at", "50000", "--mean")


def test_a_key_added_after_a_run_counts_as_its_default_and_nothing_else(tmp_path):
    """Runs recorded before default.yaml gained common_reward pool with later ones that have its default
    (True), not with one that changed it; a key default.yaml lacks is never taken as agreeing."""
    proc = mean_of(tmp_path / "default", zoo_run(0), zoo_run(1, common_reward=True))
    assert proc.returncode == 0 and "| 3m | qatten | 0, 1 | 0.38 (0.50, 0.25) |" in proc.stdout, proc.stderr
    assert "differ in common_reward" in mean_of(tmp_path / "changed", zoo_run(0), zoo_run(1, common_reward=False)).stderr
    assert "differ in made_up_key" in mean_of(tmp_path / "unknown", zoo_run(0), zoo_run(1, made_up_key=1)).stderr


KEEP = os.path.join(REPO, "scripts", "keep_records.py")


def keep(source, dest) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, KEEP, str(source), str(dest)], cwd=REPO, capture_output=True, text=True,
                          timeout=60)


def test_keep_records_copies_finished_runs_and_tells_runs_apart_by_their_token(tmp_path):
    sacred, dest = tmp_path / "sacred", tmp_path / "kept"
    write_run(str(sacred / "3m" / "qatten_seed0" / "1"), zoo_run(0), curve([0, 50_100], [0.0, 0.5]))
    write_run(str(sacred / "3m" / "qatten_seed1" / "1"), zoo_run(1), curve([0], [0.0]),
              sacred_run("2026-12-01T10:00:00", "INTERRUPTED", "abc", False))
    (sacred / "3m" / "qatten_seed0" / "1" / "cout.txt").write_text("log")
    (sacred / "3m" / "qatten_seed0" / "1" / "model.th").write_text("not a record")
    proc = keep(sacred, dest)
    assert proc.returncode == 0, proc.stderr
    run = dest / "3m" / "qatten_seed0" / "1"
    assert sorted(os.listdir(run)) == ["config.json", "cout.txt", "info.json", "run.json"]
    assert "left out (not finished)" in proc.stdout and "qatten_seed1" in proc.stdout
    assert not (dest / "3m" / "qatten_seed1").exists()
    # Again: the same run is updated in place; another run under the same name gets the next number.
    write_run(str(tmp_path / "other" / "3m" / "qatten_seed0" / "1"), {**zoo_run(0), "unique_token": "other"},
              curve([0], [0.0]))
    assert keep(sacred, dest).returncode == 0 and keep(tmp_path / "other", dest).returncode == 0
    assert sorted(os.listdir(dest / "3m" / "qatten_seed0")) == ["1", "2"]
    assert json.loads((dest / "3m" / "qatten_seed0" / "2" / "config.json").read_text())["unique_token"] == "other"


def test_mean_refuses_to_pool_runs_of_different_simulator_sources(tmp_path):
    for seed, digest in ((0, "aaaa11112222"), (1, "bbbb33334444")):
        write_run(str(tmp_path / str(seed)), zoo_run(seed), curve([0, 50_100], [0.0, 0.5]))
        (tmp_path / str(seed) / "cout.txt").write_text(f"SMAC engine: builtin, sources sha256 {digest}\n")
    proc = table(str(tmp_path), "--at", "50000", "--mean")
    assert proc.returncode == 1 and "differ in simulator sources ('aaaa11112222' against 'bbbb33334444')" in proc.stderr


@pytest.mark.parametrize("first, second", [({"learner_threads": 1}, {"learner_threads": 0}),
                                           ({"use_cuda": True, "buffer_cpu_only": False}, {"use_cuda": False})])
def test_runs_differing_only_in_where_the_step_runs_pool_as_seeds(tmp_path, first, second):
    """A seed batch's runs train on 1 thread, a run alone on all cores, a GPU run on the GPU: the same setting
    (the order of the training step's float sums)."""
    proc = mean_of(tmp_path / "threads", zoo_run(0, **first), zoo_run(1, **second))
    assert proc.returncode == 0 and "| 3m | qatten | 0, 1 | 0.38 (0.50, 0.25) |" in proc.stdout, proc.stderr
