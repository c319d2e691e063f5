"""SMACv2's 15 scenarios by name: their config files (src/config/envs/smacv2_configs/<scenario>.yaml,
EPyMARL's values) and the env that plays one.

One loader for every reader: main.py stacks a scenario's file as a config layer of env sc2v2, and
the report tools (scripts/fidelity.py, bench/bench_env.py) play a scenario with the env_args of its
file, as a run of `--env-config=sc2v2 with env_args.map_name=<scenario>` does.
"""
from os.path import abspath, dirname, join
from typing import TYPE_CHECKING, Any

import yaml

from ..game.maps import SMACV2_SCENARIOS

if TYPE_CHECKING:
    from .starcraft2_v2 import StarCraftCapabilityEnvWrapper

CONFIG_DIR = join(dirname(dirname(dirname(dirname(abspath(__file__))))), "config")  # src/config


def check_scenario_name(map_name) -> None:
    """ValueError unless `map_name` is one of the 15 scenarios env sc2v2 plays by name."""
    if map_name not in SMACV2_SCENARIOS:
        given = "no env_args.map_name" if map_name is None else f"env_args.map_name={map_name!r}"
        raise ValueError(f"{given}: env sc2v2 plays one of SMACv2's scenarios: {', '.join(SMACV2_SCENARIOS)} "
                         f"(other army sizes: --env-config=sc2_gen_<race>)")


def scenario_config_path(map_name: str, config_dir: str = CONFIG_DIR) -> str:
    """The config file of scenario `map_name` under `config_dir` (a copy of src/config);
    ValueError (check_scenario_name) for any other name."""
    check_scenario_name(map_name)
    return join(config_dir, "envs", "smacv2_configs", f"{map_name}.yaml")


def read_config_file(path: str) -> dict:
    """The mapping a YAML config file holds ({} for an empty file); ValueError in one line when it
    is not valid YAML."""
    with open(path) as f:
        try:
            return yaml.safe_load(f) or {}
        except yaml.YAMLError as error:
            raise ValueError(f"{path} is not valid YAML: {' '.join(str(error).split())}") from None


def smacv2_scenario_args(map_name: str, config_dir: str = CONFIG_DIR) -> dict:
    """The env_args of scenario `map_name`'s config file (its map_name stays the scenario's)."""
    return dict(read_config_file(scenario_config_path(map_name, config_dir)).get("env_args", {}))


def scenario_env(map_name: str, **env_args: Any) -> "StarCraftCapabilityEnvWrapper":
    """SMACv2's capability wrapper playing scenario `map_name` with its file's env_args, `env_args`
    over them (e.g. seed, backend, heuristic_ai)."""
    # Imported on use: main.py reads the scenario files without loading the simulator.
    from .starcraft2_v2 import StarCraftCapabilityEnvWrapper

    return StarCraftCapabilityEnvWrapper(**{**smacv2_scenario_args(map_name), "map_name": map_name, **env_args})
