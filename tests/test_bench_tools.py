"""bench/trace_engine.py: the check that a change to the built-in simulator plays the same battles;
scripts/fidelity.py and bench/bench_env.py on SMACv2's scenarios."""
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import trace_engine  # noqa: E402  (needs bench/ on sys.path)


def test_a_trajectory_is_recorded_the_same_twice_and_a_change_is_found_at_its_step():
    first = trace_engine.record(["3m"], steps=30, seed=1)
    second = trace_engine.record(["3m"], steps=30, seed=1)
    assert set(first) == {"3m/random", "3m/heuristic"}
    for key in first:
        assert trace_engine.first_difference(first[key], second[key]) == "identical"
    changed = second["3m/random"].copy()
    changed[11, 0] += 1e-12
    assert trace_engine.first_difference(first["3m/random"], changed).startswith("differ from step 12")
    assert "shapes" in trace_engine.first_difference(first["3m/random"], changed[:, :-1])


def test_the_two_policies_play_different_battles():
    record = trace_engine.record(["3m"], steps=30, seed=1)
    assert not np.array_equal(record["3m/random"], record["3m/heuristic"])


# ---- scripts/fidelity.py and bench/bench_env.py on SMACv2's scenarios -------------------------------------------

def load_script(path: Path):
    """A script of scripts/ or bench/ as a module (they are not packages)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ROOT = Path(__file__).resolve().parents[1]
fidelity = load_script(ROOT / "scripts" / "fidelity.py")
bench_env = load_script(ROOT / "bench" / "bench_env.py")


def test_both_tools_play_a_scenario_with_its_config_files_env_args():
    from envs.starcraft.interface.smacv2_configs import smacv2_scenario_args

    file_args = smacv2_scenario_args("zerg_10_vs_11")
    # Two of the file's values that differ from the env's defaults: the file's env_args are the ones played.
    assert file_args["use_unit_ranges"] is True and file_args["obs_own_pos"] is True
    envs = [fidelity.make_env("zerg_10_vs_11", 3, heuristic_ai=False), bench_env.make_env("zerg_10_vs_11", 3)]
    for env in envs:
        assert (env.n_agents, env.n_enemies, env.use_unit_ranges, env.obs_own_pos) == (10, 11, True, True)
        assert env.map_name == "zerg_10_vs_11" and env.seed() == 3
    assert envs[0].get_env_info() == envs[1].get_env_info()


def test_a_smacv2_fidelity_cell_is_played_saved_and_loaded_in_the_reports_order(tmp_path, capsys):
    part = tmp_path / "part.json"
    table = fidelity.main(["--maps", "terran_5_vs_5", "--seeds", "1", "--episodes", "1",
                           "--policies", "random", "heuristic", "--save", str(part)])
    assert set(table) == {("terran_5_vs_5", "random"), ("terran_5_vs_5", "heuristic")}
    cells = json.loads(part.read_text())["cells"]
    for map_name, policy, wins, episodes, steps in cells:
        assert episodes == 1 and wins in (0, 1) and 0 < steps <= 200  # the 10gen maps' episode limit
        assert table[(map_name, policy)][0] == 100.0 * wins
    # A part holding SMAC's 3m and two scenarios out of order prints them as --smacv2 orders them,
    # after SMAC's maps, with no paper value.
    saved = json.loads(part.read_text())
    saved["cells"] = [[m, "random", 0, 1, 50] for m in ("zerg_5_vs_5", "3m", "protoss_20_vs_23", "protoss_10_vs_11")]
    part.write_text(json.dumps(saved))
    capsys.readouterr()
    fidelity.main(["--load", str(part)])
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [row.split()[:2] for row in rows] == [["3m", "-"], ["protoss_10_vs_11", "-"],
                                                 ["protoss_20_vs_23", "-"], ["zerg_5_vs_5", "-"]]


def test_the_smacv2_presets_are_race_by_race_in_the_papers_order():
    sizes = ("5_vs_5", "10_vs_10", "20_vs_20", "10_vs_11", "20_vs_23")
    assert fidelity.SMACV2_MAPS == tuple(f"{race}_{size}" for race in ("protoss", "terran", "zerg") for size in sizes)
    assert bench_env.SMACV2_PRESET == ("3m", "corridor") + tuple(
        f"{race}_{size}" for race in ("protoss", "terran", "zerg") for size in sizes if size != "10_vs_11")
    with pytest.raises(SystemExit):  # one or the other
        fidelity.main(["--smacv2", "--maps", "3m"])


def test_bench_measures_a_scenario_and_a_baseline_without_smacv2_is_skipped_for_it(tmp_path, capsys):
    figures = bench_env.bench_map("protoss_5_vs_5", steps=40, seed=0)
    assert figures["episodes"] >= 0 and figures["step_sps"] >= figures["runner_sps"] > 0
    old_src = tmp_path / "src"
    (old_src / "envs" / "starcraft").mkdir(parents=True)
    assert bench_env.baseline_lacks_smacv2(str(old_src), ["3m", "zerg_20_vs_23"]) == ["zerg_20_vs_23"]
    (old_src / bench_env.SCENARIO_MODULES[1]).write_text("")  # the module's path before the split into layers
    assert bench_env.baseline_lacks_smacv2(str(old_src), ["3m", "zerg_20_vs_23"]) == []
    assert bench_env.table_line("zerg_20_vs_23", 40, figures, None, True).split()[-4:] == ["-"] * 4
    bench_env.main(["--maps", "terran_5_vs_5", "--steps", "10"])
    assert capsys.readouterr().out.splitlines()[-1].split()[:2] == ["terran_5_vs_5", "10"]
    with pytest.raises(SystemExit):
        bench_env.main(["--maps", "terran_5__vs_5"])


def write_record(folder: Path, results: str, lengths: dict) -> None:
    """A sacred record of a run that names `results` as its results path, with test episode lengths."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"local_results_path": results, "test_nepisode": 100,
                                                    "batch_size_run": 10}))
    (folder / "info.json").write_text(json.dumps({"test_ep_length_mean_T": list(lengths),
                                                  "test_ep_length_mean": list(lengths.values())}))


def test_the_epymarl_bench_counts_test_steps_of_its_own_run_only(tmp_path):
    import bench_epymarl
    repo, results = tmp_path / "epymarl", str(tmp_path / "run")
    write_record(repo / "results" / "sacred" / "qmix" / "task" / "1", results, {0: 50.0, 1000: 20.0, 2000: 10.0})
    write_record(repo / "results" / "sacred" / "qmix" / "task" / "2", str(tmp_path / "other"), {0: 1.0})
    steps = bench_epymarl.logged_test_steps(str(repo), results)
    assert steps == {0: 5000.0, 1000: 2000.0, 2000: 1000.0}
    # tests start at 0 s (t_env 0), 10 s (1000) and 15 s (2000); counted from 1000: the test at 1000 only
    tests = [(0.0, 0), (10.0, 1000), (15.0, 2000)]
    assert bench_epymarl.steady_rate_with_tests(tests, 1000, steps) == (1000 + 2000) / 5
    write_record(tmp_path / "run" / "sacred" / "1", results, {0: 1.0})  # a second record naming the same folder
    with pytest.raises(SystemExit, match="2 sacred records"):
        bench_epymarl.logged_test_steps(str(repo), results)


# ---- the machine line of every benchmark --------------------------------------------------------------------------

def test_machine_line_names_the_cpu_with_its_family_and_model(tmp_path):
    import machine_info

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n"
                       "model name\t: AMD EPYC\n\nprocessor\t: 1\nmodel name\t: other\n")
    assert machine_info.cpu_name(str(cpuinfo)) == "AMD EPYC (family 25, model 1)"
    assert machine_info.cpu_name(str(tmp_path / "missing"))  # falls back to what platform knows
    assert f"{os.cpu_count()} CPUs" in machine_info.describe_machine()
