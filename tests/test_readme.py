"""The README's quick-start commands run as written, shortened with a small t_max and small buffers (besides
t_max, only keys a command does not set itself are added), each into a temporary results folder."""
import json
import os
import re
import shlex

import pytest

from main_runs import REPO, run_main

# Added to every command unless it sets the key itself (t_max always: the last value given wins), so
# that each is a short run that still trains, tests and saves.
SHORT = {"batch_size_run": "2", "buffer_size": "8", "batch_size": "4", "test_interval": "100",
         "test_nepisode": "2", "log_interval": "100", "runner_log_interval": "100", "learner_log_interval": "100",
         "use_cuda": "False"}
SAVED = "results/models/<unique_token>"  # the README's placeholder for a run's saved models


def quick_start_commands() -> list:
    return readme_commands("## Quick start")


def readme_commands(heading: str) -> list:
    """The `python src/main.py ...` commands of the first bash block under the README's `heading`,
    continuation lines joined."""
    with open(os.path.join(REPO, "README.md")) as f:
        readme = f.read()
    section = readme[readme.index(heading):]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1).replace("\\\n", " ")
    return [line.strip() for line in block.splitlines() if line.strip().startswith("python src/main.py")]


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


def test_every_quick_start_command_runs(tmp_path):
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
