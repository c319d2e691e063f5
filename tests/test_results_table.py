"""scripts/results_table.py: one row per run found under the given folders, with its kind and the test
metric its env logs."""
import json
import os
import subprocess
import sys

from main_runs import REPO

TABLE = os.path.join(REPO, "scripts", "results_table.py")


def write_run(folder: str, config: dict, info: dict) -> None:
    os.makedirs(folder)
    files = {"config.json": config, "info.json": info,
             "run.json": {"status": "COMPLETED", "start_time": "2026-12-01T10:00:00", "stop_time": "2026-12-01T10:06:00"}}
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
