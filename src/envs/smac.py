"""The built-in SMAC simulator for any code written against SMAC or SMACv2: the environment marlkit trains on,
under SMAC's names.

Installed as a package (`pip install .` from this repository; NumPy and Numba only, no torch):

    from marlkit.smac import StarCraft2Env              # instead of: from smac.env import StarCraft2Env
    env = StarCraft2Env(map_name="3s5z", seed=1)

Inside this repository (src/ on sys.path) the same module is `envs.smac`.

- ``StarCraft2Env``: SMAC's constructor (every argument, SMAC's defaults), methods, return types and
  get_env_info() keys. ``backend`` picks the engine: "auto" (the default) plays StarCraft II where it is
  installed with the map (SC2PATH; that needs pysc2: `pip install ".[sc2]"`) and the simulator otherwise,
  "builtin" always the simulator. Arguments that only mean something to the game (game_version,
  window_size_x/y, replay_dir for SC2 replays) are accepted; on the simulator save_replay() writes the
  simulator's own replay (record_replay=True keeps the episodes to write).
- ``StarCraftCapabilityEnvWrapper``: SMACv2's wrapper (capability_config, the 10gen maps), as in
  `smacv2.env.starcraft2.wrapper`.
- ``get_map_params``: SMAC's map table (`smac.env.starcraft2.maps.get_map_params`).
- PettingZoo: ``marlkit.smac_pettingzoo`` (SMAC's `smac.env.pettingzoo.StarCraft2PZEnv`).

Bad input raises, as inside marlkit: ValueError for an unknown map or backend, or for actions of the
wrong length or unavailable to an agent; TypeError for an argument SMAC does not have.
"""
import dataclasses

from .multiagentenv import MultiAgentEnv
from .starcraft.game import maps
from .starcraft.interface.starcraft2 import StarCraft2Env
from .starcraft.interface.starcraft2_v2 import StarCraftCapabilityEnvWrapper

__all__ = ["MultiAgentEnv", "StarCraft2Env", "StarCraftCapabilityEnvWrapper", "get_map_params"]


def get_map_params(map_name: str) -> dict:
    """SMAC's entry for `map_name` as SMAC gives it, a dict: n_agents, n_enemies, limit, a_race, b_race,
    unit_type_bits, map_type. ValueError for a map SMAC does not have."""
    return dataclasses.asdict(maps.get_map_params(map_name))
