"""SMAC's PettingZoo interface on the built-in simulator: what `smac.env.pettingzoo.StarCraft2PZEnv` offers, with
PettingZoo's current API (reset returns observations and infos; reset(seed=...) reseeds).

    from marlkit import smac_pettingzoo                 # installed: pip install ".[pettingzoo]"
    env = smac_pettingzoo.parallel_env(map_name="3m", seed=0)
    observations, infos = env.reset()

As SMAC's wrapper does: agents are named by unit type and rank (marine_0, marine_1, stalker_0, ...); an
agent's actions are SMAC's without the no-op (Discrete(n_actions - 1): action a is SMAC's a + 1), its
observation a dict of "observation" (SMAC's, float32) and "action_mask" (the available actions among
those, int8); every live agent gets the team reward; an agent whose unit died is terminated, and all are
when the battle ends (won, lost, or SMAC's episode limit); all are truncated after max_cycles steps
(default: the map's episode limit). ``raw_env`` is the AEC version, ``env`` the AEC version with
PettingZoo's order and bounds checks, as in SMAC.
"""
from typing import Any

import numpy as np

try:
    from gymnasium import spaces
    from pettingzoo.utils import wrappers
    from pettingzoo.utils.conversions import parallel_to_aec
    from pettingzoo.utils.env import ParallelEnv
except ModuleNotFoundError as missing:  # the package's optional part: say how to get it, in one line
    raise ModuleNotFoundError(f"marlkit.smac_pettingzoo needs {missing.name}: pip install \"marlkit[pettingzoo]\" "
                              f"(in a checkout: pip install \".[pettingzoo]\")", name=missing.name) from None

from .smac import StarCraft2Env, get_map_params

# The unit types SMAC's wrapper names, as the env's <type>_id attributes (set at its first reset).
UNIT_TYPES = ("marine", "marauder", "medivac", "hydralisk", "zergling", "baneling", "stalker", "colossus",
              "zealot")


class StarCraft2ParallelEnv(ParallelEnv):
    """A StarCraft2Env (SMAC's arguments) as a PettingZoo parallel env."""

    metadata = {"render_modes": ["human"], "name": "sc2"}

    def __init__(self, max_cycles: int | None = None, **smac_args: Any):
        self.env = StarCraft2Env(**smac_args)
        self.max_cycles = max_cycles or get_map_params(self.env.map_name)["limit"]
        self.env.reset()  # the unit types are known from the first episode on
        self.agent_ids = self._name_agents()  # {name: SMAC agent id}
        self.possible_agents = list(self.agent_ids)
        self.agents = self.possible_agents[:]
        n_choices = self.env.get_total_actions() - 1  # no no-op: dead units are not asked
        self.action_spaces = {name: spaces.Discrete(n_choices) for name in self.possible_agents}
        self.observation_spaces = {name: spaces.Dict({
            "observation": spaces.Box(low=-1, high=1, shape=(self.env.get_obs_size(),), dtype=np.float32),
            "action_mask": spaces.Box(low=0, high=1, shape=(n_choices,), dtype=np.int8),
        }) for name in self.possible_agents}
        self.state_space = spaces.Box(low=-1, high=1, shape=(self.env.get_state_size(),), dtype=np.float32)
        self.frames = 0

    def _name_agents(self) -> dict[str, int]:
        """SMAC's names: the unit type and its rank among the agents of that type, in agent order (SMAC's
        wrapper counts a run of one type; agents of a type are contiguous on every SMAC map)."""
        type_names = {getattr(self.env, f"{name}_id"): name for name in reversed(UNIT_TYPES)}
        counts: dict[str, int] = {}
        names = {}
        for agent_id, unit in self.env.agents.items():
            if unit.unit_type not in type_names:
                raise ValueError(f"unit type {unit.unit_type} of agent {agent_id} has no SMAC name")
            kind = type_names[unit.unit_type]
            names[f"{kind}_{counts.get(kind, 0)}"] = agent_id
            counts[kind] = counts.get(kind, 0) + 1
        return names

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """A new episode; with `seed` the game restarts with that seed first (SMAC's seed())."""
        if seed is not None:
            self.env._seed = int(seed)
            self.env.full_restart()
        self.env.reset()
        self.agents = self.possible_agents[:]
        self.frames = 0
        return self._observe(), {name: {} for name in self.agents}

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        smac_actions = [0] * self.env.n_agents  # no-op for the dead and the absent
        for name in self.agents:
            action = actions.get(name)
            if action is not None:
                smac_actions[self.agent_ids[name]] = int(action) + 1
        reward, terminated, _ = self.env.step(smac_actions)
        self.frames += 1
        truncated = self.frames >= self.max_cycles
        terminations = {name: bool(terminated) or self.env.get_unit_by_id(self.agent_ids[name]).health == 0
                        for name in self.agents}
        truncations = {name: truncated for name in self.agents}
        observations = self._observe()
        rewards = {name: float(reward) for name in self.agents}
        infos = {name: {} for name in self.agents}
        self.agents = [name for name in self.agents if not (terminations[name] or truncations[name])]
        return observations, rewards, terminations, truncations, infos

    def _observe(self) -> dict:
        return {name: {"observation": np.asarray(self.env.get_obs_agent(agent_id), dtype=np.float32),
                       "action_mask": np.asarray(self.env.get_avail_agent_actions(agent_id)[1:], dtype=np.int8)}
                for name, agent_id in ((name, self.agent_ids[name]) for name in self.agents)}

    def state(self) -> np.ndarray:
        return np.asarray(self.env.get_state(), dtype=np.float32)

    def render(self) -> None:
        self.env.render()

    def close(self) -> None:
        self.env.close()


def parallel_env(max_cycles: int | None = None, **smac_args: Any) -> StarCraft2ParallelEnv:
    """SMAC's parallel_env: a StarCraft2Env with `smac_args` as a PettingZoo parallel env."""
    return StarCraft2ParallelEnv(max_cycles, **smac_args)


def raw_env(max_cycles: int | None = None, **smac_args: Any):
    """The AEC version of parallel_env (SMAC's raw_env)."""
    return parallel_to_aec(parallel_env(max_cycles, **smac_args))


def env(max_cycles: int | None = None, **smac_args: Any):
    """raw_env with PettingZoo's bounds and order checks, as SMAC's env."""
    return wrappers.OrderEnforcingWrapper(wrappers.AssertOutOfBoundsWrapper(raw_env(max_cycles, **smac_args)))
