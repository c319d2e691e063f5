"""The README's commands run as written, shortened with a small t_max and small buffers (besides
t_max, only keys a command does not set itself are added; the sweep also runs one seed per point),
each into a temporary results folder. The
algorithm sections' commands run in tests/test_value_algorithms.py and tests/test_policy_algorithms.py;
the first test here checks that no README command is left out."""
import json
import os
import re
import shlex
import subprocess
import sys

import pytest

import sweep
from main_runs import REPO, run_main

# Added to every command unless it sets the key itself (t_max always: the last value given wins), so
# that each is a short run that still trains, tests and saves.
SHORT = {"batch_size_run": "2", "buffer_size": "8", "batch_size": "4", "test_interval": "100",
         "test_nepisode": "2", "log_interval": "100", "runner_log_interval": "100", "learner_log_interval": "100",
         "use_cuda": "False"}
SAVED = "results/models/<unique_token>"  # the README's placeholder for a run's saved models


def quick_start_commands() -> list:
    return readme_commands("## Quick start")


def readme() -> str:
    with open(os.path.join(REPO, "README.md")) as f:
        return f.read()


def bash_commands(block: str, program: str) -> list:
    """The `python <program> ...` lines of a bash block, continuation lines joined."""
    return [line.strip() for line in block.replace("\\\n", " ").splitlines()
            if line.strip().startswith(f"python {program}")]


def readme_commands(heading: str, program: str = "src/main.py") -> list:
    """The `python <program> ...` commands of the first bash block under the README's `heading`."""
    text = readme()
    section = text[text.index(heading):]
    return bash_commands(re.search(r"```bash\n(.*?)```", section, re.S).group(1), program)


# The README sections whose first bash block a test runs, command by command.
RUN_SECTIONS = ("# marlkit", "## Quick start", "### Value-based algorithms", "### Policy-based algorithms",
                "### Gymnasium and PettingZoo tasks", "## SMACv2 without StarCraft II", "## Seeds",
                "## Sweeps and plots", "## Long runs", "## Reporting results")


def test_every_readme_command_is_run_by_a_test():
    """A `python src/...` command anywhere in the README lies in a section whose commands are run."""
    run = {command for heading in RUN_SECTIONS for command in readme_commands(heading, "src/")}
    written = {command for block in re.findall(r"```bash\n(.*?)```", readme(), re.S)
               for command in bash_commands(block, "src/")}
    assert written and written <= run, f"README commands no test runs: {sorted(written - run)}"


def shortened(command: str, results: str, saved: str) -> list:
    argv = shlex.split(command.replace(SAVED, saved))[2:]  # without "python src/main.py"
    if "with" not in argv:
        argv.append("with")
    given = {token.split("=", 1)[0] for token in argv[argv.index("with") + 1:]}
    return argv + [f"{key}={value}" for key, value in SHORT.items() if key not in given] + \
        ["t_max=150", f"local_results_path={results}"]


def test_the_quick_start_has_the_commands_of_pymarl2s_presets_and_stag_hunt():
    commands = " ".join(quick_start_commands())
    for config in ("qmix", "iql", "qmix_large", "qmix_high_sample_efficiency", "qmix_predator_prey"):
        assert f"--config={config} " in commands
    assert "--env-config=stag_hunt" in commands and SAVED in commands


# The run names PyMARL2's presets give (sacred's results folder, the unique_token's start).
PRESET_NAMES = {"iql": "iql_env=8_adam", "qmix_large": "qmix_large_env=8_adam_td_lambda",
                "qmix_high_sample_efficiency": "qmix_env=4_adam_td_lambda"}


def test_every_quick_start_command_runs(tmp_path):
    """Each command, shortened: a training run tests (and on SMAC trains); an
    evaluation loads the model the command before it saved."""
    saved = ""  # the models folder of the latest run that saved models, for the commands that load one
    for i, command in enumerate(quick_start_commands()):
        if SAVED in command and not saved:
            pytest.fail(f"'{command}' needs a saved model, but no command before it saves one")
        results = tmp_path / str(i)
        proc = run_main(*shortened(command, str(results), saved), timeout=300)
        assert proc.returncode == 0, f"{command}\n{proc.stderr[-3000:]}"
        (config_path,) = [os.path.join(root, name) for root, _, files in os.walk(results / "sacred")
                          for name in files if name == "config.json"]
        with open(config_path) as f:
            config = json.load(f)
        if config["save_model"]:
            saved = str(results / "models" / config["unique_token"])
        if SAVED in command:
            assert config["run_kind"] == "evaluate" and "Evaluation: " in proc.stderr
            continue
        with open(os.path.join(os.path.dirname(config_path), "info.json")) as f:
            info = json.load(f)
        assert info["test_return_mean"], command
        if config["env"] == "sc2":  # (the stag hunt's 200-step episodes fill no training batch by t_max 150)
            assert "loss_td" in info, command
        alg = re.search(r"--config=(\w+)", command).group(1)
        assert config["name"] == PRESET_NAMES.get(alg, config["name"]), command


def test_every_gymnasium_and_pettingzoo_command_runs(tmp_path):
    commands = readme_commands("### Gymnasium and PettingZoo tasks")
    assert {re.search(r'key="?([a-z]+)', c).group(1) for c in commands} == {"lbforaging", "rware", "pz", "vmas"}
    for i, command in enumerate(commands):
        # The envs stepped in the main process: starting env workers for each command is most of its
        # time, and tests/test_gymma.py runs each family in workers.
        proc = run_main(*shortened(command, str(tmp_path / str(i)), ""), "env_processes=main")
        assert proc.returncode == 0, f"{command}\n{proc.stderr[-3000:]}"
        assert ("test_total_return_mean" if "common_reward=False" in command else "test_return_mean") in proc.stderr


def test_every_smacv2_command_runs(tmp_path):
    commands = readme_commands("## SMACv2 without StarCraft II")
    assert any("--env-config=sc2v2" in c for c in commands) and any("--env-config=sc2_gen_" in c for c in commands)
    for i, command in enumerate(commands):
        results = tmp_path / str(i)
        proc = run_main(*shortened(command, str(results), ""), timeout=300)
        assert proc.returncode == 0, f"{command}\n{proc.stderr[-3000:]}"
        (config_path,) = [os.path.join(root, name) for root, _, files in os.walk(results / "sacred")
                          for name in files if name == "config.json"]
        with open(config_path) as f:
            config = json.load(f)
        backend = config["env_args"]["backend"]
        assert config["env"] in ("sc2wrapped", "sc2v2") and backend in ("builtin", "sc2")
        # The engine is in the run's name; the simulator's digest in its log.
        assert f"_{backend}__" in config["unique_token"] and "test_battle_won_mean" in proc.stderr
        assert backend == "sc2" or "SMAC engine: builtin, sources sha256" in proc.stderr


def test_the_seeds_command_runs_one_recorded_run_per_seed(tmp_path):
    (command,) = readme_commands("## Seeds")
    proc = run_main(*shortened(command, str(tmp_path), ""), timeout=300)
    assert proc.returncode == 0, f"{command}\n{proc.stderr[-3000:]}"
    configs = []
    for root, _, files in os.walk(tmp_path / "sacred"):
        if "config.json" in files:
            with open(os.path.join(root, "config.json")) as f:
                configs.append(json.load(f))
    assert sorted(config["seed"] for config in configs) == [1, 2, 3, 4]
    assert {config["seed_batch"]["size"] for config in configs} == {4}
    assert proc.stderr.count("Completed after") == 4


def test_the_headline_command_runs_and_the_long_runs_command_resumes_it(tmp_path):
    """The README's first command (corridor), shortened and saving its models, then the README's
    resume command with its token. The first run is a new `python src/main.py` process, as a user
    starts it; the suite's other runs go through tests/main_server.py."""
    (headline,) = readme_commands("# marlkit")
    (command,) = readme_commands("## Long runs")
    first = run_main(*shortened(headline, str(tmp_path), ""), "t_max=100", "save_model=True", fresh=True)
    assert first.returncode == 0, first.stderr[-3000:]
    (token,) = os.listdir(tmp_path / "models")
    saved = str(tmp_path / "models" / token)
    resumed = run_main(*shortened(command, str(tmp_path), saved))
    assert resumed.returncode == 0 and "Resumed at t_env" in resumed.stderr, resumed.stderr[-3000:]
    assert max(int(step) for step in os.listdir(saved)) >= 150  # the same run's folder, carried on


def test_the_sweep_and_plot_commands_run(tmp_path):
    """The README's sweep, each run shortened and one seed of its first point run (test_sweep.py runs every
    point and seed of a sweep end to end; the command's own 9 runs are checked as the sweep expands them),
    and the plot of its results."""
    (sweep_command,) = readme_commands("## Sweeps and plots", "src/sweep.py")
    (plot_command,) = readme_commands("## Sweeps and plots", "src/plot.py")
    argv = shortened(sweep_command, str(tmp_path), "")
    grid = [f"qmix_eps{eps}_seed{{}}" for eps in (5000, 20000, 50000)]
    assert [run.name for run in sweep.Sweep(*sweep.parse_command_line(argv)).runs] == [
        name.format(seed) for name in grid for seed in range(3)]
    assert argv.count("--seeds") == 1 and argv[argv.index("--seeds") + 1] == "3"
    argv[argv.index("--seeds") + 1] = "1"
    grid_at = argv.index("--grid") + 1
    argv[grid_at] = argv[grid_at].split(",")[0]  # its first point
    proc = subprocess.run([sys.executable, os.path.join(REPO, "src", "sweep.py"), *argv], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = os.listdir(tmp_path / "sacred" / "small_stag_hunt")
    assert runs == [grid[0].format(0)]
    plot_argv = shlex.split(plot_command.replace("results/", f"{tmp_path}/"))[2:]
    proc = subprocess.run([sys.executable, os.path.join(REPO, "src", "plot.py"), *plot_argv,
                           "--out", str(tmp_path / "plot")], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (tmp_path / "plot.png").exists()


def test_the_reporting_commands_run_on_a_short_run_and_its_absolute_metric(tmp_path):
    """The README's reporting commands on one short 3m run that saves models: the aggregate table at a
    step the run tested, the absolute-metric evaluation of its best checkpoint, and the table and
    marl-eval JSON of the absolute metric."""
    (evaluate,) = readme_commands("## Reporting results")
    tables = readme_commands("## Reporting results", "scripts/results_table.py")
    results = str(tmp_path / "results")
    train = run_main("--config=qmix", "--env-config=sc2", "with", "save_model=True", "save_model_interval=50",
                     *[f"{key}={value}" for key, value in SHORT.items()], "t_max=250", f"local_results_path={results}")
    assert train.returncode == 0, train.stderr[-3000:]
    (token,) = os.listdir(os.path.join(results, "models"))
    proc = run_main(*shortened(evaluate, results, os.path.join(results, "models", token)))
    assert proc.returncode == 0 and "Absolute metric: the best checkpoint of run" in proc.stderr, proc.stderr[-3000:]
    outputs = []
    for command in tables:
        argv = shlex.split(command.replace("results/", f"{results}/").replace("plots/", f"{tmp_path}/plots/"))[2:]
        argv = ["100" if value == "200000" else value for value in argv]  # a step the short run tested
        table = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "results_table.py"), *argv], cwd=REPO,
                               capture_output=True, text=True, timeout=120)
        assert table.returncode == 0, f"{command}\n{table.stderr[-3000:]}"
        outputs.append(table.stdout)
    assert "| qmix_env=8_adam_td_lambda | 1 | 1 | " in outputs[0] and "Score: absolute metric" in outputs[1]
    assert sorted(os.listdir(tmp_path / "plots" / "report")) == [
        "aggregates.png", "performance_profile.png", "sample_efficiency.png"]
    with open(os.path.join(results, "marl_eval.json")) as f:
        run = json.load(f)["sc2"]["3m"]["qmix_env=8_adam_td_lambda"]
    (seed,) = run.values()
    assert len(seed["absolute_metrics"]["win_rate"]) == 20  # 10 x test_nepisode 2
