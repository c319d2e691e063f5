"""Environment registry: env name (the `env:` key of a config) -> factory(**env_args) -> env."""
from typing import Callable

from .multiagentenv import MultiAgentEnv
from .null_env import NullEnv
from .one_step_matrix_game import OneStepMatrixGame
from .small_stag_hunt import SmallStagHunt
from .stag_hunt import StagHunt


def _make_gymma(**env_args) -> MultiAgentEnv:
    # Imported on use: gymnasium and the task packages are not needed by the other envs.
    from .gymma import GymmaEnv

    return GymmaEnv(**env_args)


def _make_sc2(**env_args) -> MultiAgentEnv:
    # Imported on use: the SMAC simulator pulls in far more than the small test environments.
    from .starcraft.interface.starcraft2 import StarCraft2Env

    return StarCraft2Env(**env_args)


def _make_sc2_v2(**env_args) -> MultiAgentEnv:
    # SMACv2's capability wrapper: each reset draws the teams and start positions of capability_config.
    from .starcraft.interface.starcraft2_v2 import StarCraftCapabilityEnvWrapper

    return StarCraftCapabilityEnvWrapper(**env_args)


REGISTRY: dict[str, Callable[..., MultiAgentEnv]] = {
    "sc2": _make_sc2,
    "sc2wrapped": _make_sc2_v2,  # SMACv2's own configs (sc2_gen_<race>.yaml)
    "sc2v2": _make_sc2_v2,  # EPyMARL's name (sc2v2.yaml with a scenario's map_name)
    "one_step_matrix_game": OneStepMatrixGame,
    "stag_hunt": StagHunt,  # PyMARL2's stag hunt
    "small_stag_hunt": SmallStagHunt,  # marlkit's small 5x5 stag hunt, for quick learning checks
    "gymma": _make_gymma,  # any Gymnasium / PettingZoo multi-agent task (EPyMARL's env_args.key)
    "null": NullEnv,  # zero-cost env with SMAC shapes, for benchmarks
}


# The envs played by the SMAC simulator or StarCraft II (env_args.backend, the simulator's digest):
# SMAC, and SMACv2 under its own configs' name and EPyMARL's.
STARCRAFT_ENVS = ("sc2", "sc2wrapped", "sc2v2")


def make_env(name: str, **env_args) -> MultiAgentEnv:
    """Build the environment registered as `name`, failing with the list of known names."""
    if name not in REGISTRY:
        raise ValueError(f"unknown env '{name}'; known envs: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name](**env_args)
