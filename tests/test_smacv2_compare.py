"""scripts/smacv2_compare.py: marlkit's SMACv2 curves beside SMACv2's published ones, read from a results
file laid out as pandas 1.x pickles a DataFrame (built here by stand-in classes, without pandas)."""
import copyreg
import os
import pickle
import subprocess
import sys
import types

import numpy as np
import pytest

from main_runs import REPO
from test_results_table import smacv2_run, write_run
from utils.run_index import rounded_test_nepisode

COMPARE = os.path.join(REPO, "scripts", "smacv2_compare.py")


def pandas_standins(monkeypatch) -> dict:
    """Classes named as pandas 1.x names them, pickling to the layout pandas 1.x writes: a DataFrame's
    state holds its BlockManager, whose state holds {"0.14.1": {"axes": [columns, index], "blocks":
    [{"values": [columns of the block, rows], "mgr_locs": slice}]}}; an Index pickles as _new_Index(cls,
    {"data": values, "name": None})."""
    modules = {name: types.ModuleType(name) for name in (
        "pandas", "pandas.core", "pandas.core.frame", "pandas.core.internals", "pandas.core.internals.managers",
        "pandas.core.indexes", "pandas.core.indexes.base", "pandas.core.indexes.numeric")}
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)

    def new_index(cls, attributes):
        raise AssertionError("only pickled here")

    class Index:
        def __init__(self, data):
            self.data = data

        def __reduce__(self):
            return new_index, (type(self), {"data": self.data, "name": None})

    class Int64Index(Index):
        pass

    class BlockManager:
        def __init__(self, columns: list[str], values: list[np.ndarray]):
            self.columns, self.values = columns, values

        def __reduce__(self):
            rows = Int64Index(np.arange(len(self.values[0]), dtype=np.int64))
            axes = [Index(np.array(self.columns, dtype=object)), rows]
            blocks = [{"values": value[None, :], "mgr_locs": slice(i, i + 1, 1)} for i, value in enumerate(self.values)]
            state = ([axis.data for axis in axes], [b["values"] for b in blocks],
                     [np.array([c], dtype=object) for c in self.columns], {"0.14.1": {"axes": axes, "blocks": blocks}})
            return copyreg.__newobj__, (BlockManager,), state

    class DataFrame:
        def __init__(self, columns: dict[str, np.ndarray]):
            self.manager = BlockManager(list(columns), list(columns.values()))

        def __reduce__(self):
            return copyreg.__newobj__, (DataFrame,), {"_mgr": self.manager, "_typ": "dataframe", "_metadata": [],
                                                       "attrs": {}, "_flags": {"allows_duplicate_labels": True}}

    placed = {"pandas.core.indexes.base": [new_index, Index], "pandas.core.indexes.numeric": [Int64Index],
              "pandas.core.internals.managers": [BlockManager], "pandas.core.frame": [DataFrame]}
    for module, objects in placed.items():
        for obj in objects:
            obj.__module__, obj.__qualname__ = module, obj.__name__ if obj is not new_index else "_new_Index"
            setattr(modules[module], obj.__qualname__, obj)
    return {"DataFrame": DataFrame}


def write_published(path: str, curves: dict, monkeypatch) -> None:
    """{scenario: {algorithm: [(steps, win rates)]}} as SMACv2's results file."""
    frame = pandas_standins(monkeypatch)["DataFrame"]
    results = {scenario: {algorithm: [frame({"step": np.asarray(steps, dtype=np.int64),
                                             "mean_test_win_rate": np.asarray(wins, dtype=np.float64),
                                             "mean_test_return": np.asarray(wins, dtype=np.float64) * 20})
                                      for steps, wins in seeds]
                          for algorithm, seeds in algorithms.items()}
               for scenario, algorithms in curves.items()}
    with open(path, "wb") as f:
        pickle.dump(results, f, protocol=4)


def compare(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, COMPARE, *args], cwd=REPO, capture_output=True, text=True, timeout=60)


def our_run(folder, seed: int, wins: list[float], rule_of_2023: bool, test_nepisode: int = 100) -> None:
    config = smacv2_run("protoss_5_vs_5", seed, f"run{seed}{rule_of_2023}")
    config.update(test_nepisode=test_nepisode, batch_size_run=8)
    config["env_args"].update(prob_obs_enemy=1.0, hide_only_unobserved_enemies=rule_of_2023)
    write_run(str(folder), config, {"test_battle_won_mean": wins, "test_battle_won_mean_T": [0, 500, 1000, 1500]})


def test_the_table_places_each_seed_against_the_games_range_under_each_observation_rule(tmp_path, monkeypatch):
    pkl = str(tmp_path / "results.pkl")
    # The game's seeds test at other steps; the window 500-1000 takes the tests from the first at or after
    # 500 to the first at or after 1000: seed A 0.2, 0.4 (0.3); seed B 0.5, 0.7 (0.6).
    write_published(pkl, {"protoss_5_vs_5": {"QMIX": [([10, 600, 1100], [0.0, 0.2, 0.4]),
                                                      ([10, 520, 1020, 1400], [0.1, 0.5, 0.7, 0.9])]}}, monkeypatch)
    # marlkit's tests: test_nepisode rounded down to whole runs of 8 envs (100 -> 96; 32 -> 32).
    our_run(tmp_path / "runs" / "1", 1, [0.0, 0.2, 0.2, 0.9], True)    # window 0.2, 0.2: below [0.3, 0.6]
    our_run(tmp_path / "runs" / "2", 2, [0.0, 0.4, 0.6, 0.0], True)    # 0.5: inside
    our_run(tmp_path / "runs" / "3", 3, [0.0, 0.8, 0.8, 0.0], False, 32)  # 0.8: above, SMACv2's current rule
    proc = compare(str(tmp_path / "runs"), "--published", pkl, "--at", "500", "--window", "500", "1000")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == ("| scenario | algorithm | source | observation rule | seeds | 500 | 500–1k | "
                        "against the game's seeds (500–1k) |")
    assert lines[2:] == [
        "| protoss_5_vs_5 | QMIX | StarCraft II (SMACv2's file, 32 test episodes) | SMACv2 of 2023-02 | 2 | "
        "0.35 (0.20, 0.50) | 0.45 (0.30, 0.60) | |",
        "| protoss_5_vs_5 | QMIX | marlkit (96 test episodes) | SMACv2 of 2023-02 | 1, 2 | 0.30 (0.20, 0.40) | "
        "0.35 (0.20, 0.50) | 1 below, 1 inside [0.300, 0.600] |",
        "| protoss_5_vs_5 | QMIX | marlkit (32 test episodes) | SMACv2's current (issue 50) | 3 | 0.80 (0.80) | "
        "0.80 (0.80) | 1 above [0.300, 0.600] |"]


def test_a_mean_is_shown_only_where_every_seed_has_a_value():
    sys.path.insert(0, os.path.join(REPO, "scripts"))
    from smacv2_compare import cell

    assert cell([0.2, 0.4]) == "0.30 (0.20, 0.40)"
    assert cell([None, 0.12, None]) == "- (-, 0.12, -)"


def test_a_pickle_naming_anything_else_is_refused_in_one_line(tmp_path):
    pkl = tmp_path / "evil.pkl"
    pkl.write_bytes(pickle.dumps({"x": os.getcwd}))  # would call any function it names
    write_run(str(tmp_path / "runs" / "1"), smacv2_run("protoss_5_vs_5", 1, "a"), {})
    proc = compare(str(tmp_path / "runs"), "--published", str(pkl))
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1
    assert proc.stderr.startswith(f"smacv2_compare.py: error: {pkl} is not SMACv2's results file: posix.getcwd is not")


class _RawObjectArray:
    """Pickles as numpy.ndarray((1,), object, buffer=8 bytes): an object array whose item is whatever address
    the bytes hold (a crash, or worse, if it were unpickled)."""

    def __reduce__(self):
        return np.ndarray, ((1,), np.dtype("O"), b"AAAAAAAA")


class _OddDtypeArray:
    def __reduce__(self):
        return np.dtype, ("V8", False, True)


@pytest.mark.parametrize("payload, message", [(_RawObjectArray(), "numpy.ndarray called directly"),
                                              (_OddDtypeArray(), "dtype 'V8' is not among")])
def test_arrays_are_rebuilt_only_as_pandas_pickles_them(tmp_path, payload, message):
    pkl = tmp_path / "forged.pkl"
    pkl.write_bytes(pickle.dumps({"protoss_5_vs_5": {"QMIX": [payload]}}))
    write_run(str(tmp_path / "runs" / "1"), smacv2_run("protoss_5_vs_5", 1, "a"), {})
    proc = compare(str(tmp_path / "runs"), "--published", str(pkl))
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1
    assert message in proc.stderr


def test_runs_of_another_algorithm_are_refused(tmp_path, monkeypatch):
    pkl = str(tmp_path / "results.pkl")
    write_published(pkl, {"protoss_5_vs_5": {"QMIX": [([0], [0.0])]}}, monkeypatch)
    write_run(str(tmp_path / "runs" / "1"), {**smacv2_run("protoss_5_vs_5", 1, "a"), "name": "vdn"}, {})
    proc = compare(str(tmp_path / "runs"), "--published", pkl)
    assert proc.returncode == 1
    assert "the runs on protoss_5_vs_5 named 'vdn' are not one of SMACv2's algorithms" in proc.stderr


@pytest.mark.skipif(not os.environ.get("SMACV2_RESULTS_PKL"), reason="set SMACV2_RESULTS_PKL to SMACv2's file")
def test_smacv2s_own_file_reads_with_its_published_qmix_values(tmp_path):
    sys.path.insert(0, os.path.join(REPO, "scripts"))
    from smacv2_compare import read_published, window_mean

    curves = read_published(os.environ["SMACV2_RESULTS_PKL"])
    assert len(curves) == 15 and len(curves["protoss_5_vs_5"]["MAPPO"]) == 5
    protoss = [window_mean(curve, 800_000, 1_000_000) for curve in curves["protoss_5_vs_5"]["QMIX"]]
    assert protoss == pytest.approx([0.35, 0.3929, 0.3203], abs=5e-5)  # 32 episodes a test: multiples of 1/32


@pytest.mark.parametrize("test_nepisode, batch_size_run, played", [(100, 8, 96), (32, 8, 32), (5, 8, 8), (20, 1, 20)])
def test_the_test_episodes_are_test_nepisode_in_whole_parallel_runs(test_nepisode, batch_size_run, played):
    """What the table's label counts, as run.py's args_sanity_check rounds it (PyMARL2's rule)."""
    assert rounded_test_nepisode(test_nepisode, batch_size_run) == played


def test_batch_steps_read_the_first_batch_and_the_overshoot_of_the_test_interval(tmp_path, monkeypatch):
    """The published seeds' envs are not recorded: the steps of their first test and the largest overshoot of
    the interval (read only between tests one interval apart) stand beside marlkit's runs of known envs."""
    pkl = str(tmp_path / "results.pkl")
    # Seed A: its first test is kept (250), overshoots 50 and 200; the 20,400 gap spans a dropped test.
    # Seed B: its first kept test is past the interval, so its first batch is unknown; overshoots 90 and, at
    # marlkit's last test (51,600), 500. Seed A's overshoot of 900 at 60,900 lies past it: not read.
    write_published(pkl, {"protoss_5_vs_5": {"QMIX": [([250, 10300, 30700, 40900, 50000, 60900], [0.0] * 6),
                                                      ([10500, 20590, 41100, 51600], [0.0] * 4)]}}, monkeypatch)
    for seed, envs, steps in [(1, 4, [240, 1300, 2310]), (2, 8, [500, 1700, 2900, 51600]), (3, 4, [240, 1300, 2310])]:
        config = {**smacv2_run("protoss_5_vs_5", seed, f"run{seed}"), "batch_size_run": envs, "test_interval": 1000}
        write_run(str(tmp_path / "runs" / str(seed)), config,
                  {"test_battle_won_mean": [0.0] * len(steps), "test_battle_won_mean_T": steps})
    proc = compare(str(tmp_path / "runs"), "--published", pkl, "--batch-steps")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[2:] == [
        "| protoss_5_vs_5 | QMIX | StarCraft II (SMACv2's file) | SMACv2 of 2023-02 | not recorded | 2 (unseeded) | "
        "- (250, -) | 350 (200, 500) |",
        "| protoss_5_vs_5 | QMIX | marlkit | SMACv2's current (issue 50) | 4 | 2 (1, 3) | 240 (240, 240) | 60 (60, 60) |",
        "| protoss_5_vs_5 | QMIX | marlkit | SMACv2's current (issue 50) | 8 | 1 (2) | 500 (500) | 200 (200) |"]


def test_batch_steps_refuse_a_run_without_its_envs_and_say_so_for_a_scenario_not_published(tmp_path, monkeypatch):
    pkl = str(tmp_path / "results.pkl")
    write_published(pkl, {"protoss_5_vs_5": {"QMIX": [([250], [0.0])]}}, monkeypatch)
    config = {**smacv2_run("zerg_5_vs_5", 1, "run1"), "batch_size_run": 4, "test_interval": 1000}
    write_run(str(tmp_path / "runs" / "1"), config, {"test_battle_won_mean": [0.0], "test_battle_won_mean_T": [240]})
    proc = compare(str(tmp_path / "runs"), "--published", pkl, "--batch-steps")
    assert proc.returncode == 0, proc.stderr
    assert ("| zerg_5_vs_5 | QMIX | StarCraft II (SMACv2's file) | SMACv2 of 2023-02 | not recorded | none in the file "
            "| - | - |") in proc.stdout
    del config["batch_size_run"]
    write_run(str(tmp_path / "runs" / "2"), {**config, "seed": 2, "unique_token": "run2"}, {"test_battle_won_mean": [0.0], "test_battle_won_mean_T": [240]})
    proc = compare(str(tmp_path / "runs"), "--published", pkl, "--batch-steps")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "smacv2_compare.py: error: the qmix_env=8_adam_td_lambda run on zerg_5_vs_5 with seed 2 (run2): its config.json has no "
        "'batch_size_run'; "
        "pass marlkit's own training runs"]
