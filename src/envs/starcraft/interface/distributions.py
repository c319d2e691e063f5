"""SMACv2's capability distributions: what each episode of a 10gen map draws (teams, start
positions, enemy masks, per-agent attack and health levels), and the checks of their config.

SMACv2 (oxwhirl/smacv2, env/starcraft2/distributions.py and wrapper.py) builds one distribution
per key of `capability_config` besides n_units / n_enemies, hands each the army sizes, and at every
reset merges what they draw into the `reset_config` dict its StarCraft2Env.reset() reads:

    {"team_gen": {"ally_team": [names], "enemy_team": [names], "id": int},
     "ally_start_positions": {"item": float [n_units, 2], "id": 0},
     "enemy_start_positions": {"item": float [n_enemies, 2], "id": 0},
     "enemy_mask": {"item": int [n_units, n_enemies], "id": 0},
     "attack": {"item": ..., "id": ...}, "health": {"item": ..., "id": ...}}

The distributions here draw the same things with the same probabilities. One difference: SMACv2
draws from unseeded generators (numpy's default_rng() per distribution, Python's `random` for
shuffles), so its episodes never repeat; here every distribution draws from the one numpy
Generator it is given, so the same seed gives the same episodes.
"""
import copy
import itertools
import math
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from ..game.maps import SMACV2_SCENARIOS, gen_map_of, get_gen_map_params
from ..game.teams import GEN_UNIT_NAMES, RACE_UNITS

# The 10gen maps are played on 32x32_flat.SC2Map (SMACv2's smac_maps.py), 32 x 32 by its MapInfo
# (width, height); SMACv2's configs give the same size as start_positions.map_x / map_y.
GEN_MAP_SIZE = (32, 32)
# SMACv2 keeps ally and enemy start points this far apart: reflected allies stay left of
# map_x / 2 - 1 ("SC2 goes wrong when you spawn ally and enemy units on top of one another"), and
# surrounding enemies end their diagonals this far from the centre on each axis.
REFLECT_GAP = 1
SURROUND_OFFSET = 2

EpisodeConfig = dict[str, dict[str, Any]]


class Distribution(ABC):
    """One key of capability_config: `generate()` draws its part of an episode's reset_config."""

    @abstractmethod
    def generate(self) -> EpisodeConfig:
        """This distribution's entries of reset_config (see the module docstring)."""


class FixedDistribution(Distribution):
    """One of a fixed list of items per episode: in turn (test_mode) or uniformly at random, with
    the item's entries shuffled (SMACv2 shuffles the stored item in place; a shuffle of a shuffle is
    a uniform permutation all the same). The id is the drawn item's position in the list."""

    def __init__(self, config: dict, rng: np.random.Generator):
        self.env_key = config["env_key"]
        self.test_mode = config["test_mode"]
        self.items = [list(item) for item in config["items"]]
        self.index = 0
        self.rng = rng

    def generate(self) -> EpisodeConfig:
        if self.test_mode:
            item_id = self.index
            self.index = (self.index + 1) % len(self.items)
        else:
            item_id = int(self.rng.integers(len(self.items)))
        item = [self.items[item_id][i] for i in self.rng.permutation(len(self.items[item_id]))]
        return {self.env_key: {"item": item, "id": item_id}}


class AllTeamsDistribution(Distribution):
    """A team drawn uniformly among the multisets of n_units unit types (SMACv2 lists them with
    combinations_with_replacement), in random order, redrawn while it holds only exception types;
    the enemies get the same team. The id is the multiset's position in that list."""

    def __init__(self, config: dict, rng: np.random.Generator):
        self.env_key = config["env_key"]
        self.combinations = list(itertools.combinations_with_replacement(config["unit_types"], config["n_units"]))
        self.exceptions = set(config.get("exception_unit_types", ()))
        self.rng = rng

    def generate(self) -> EpisodeConfig:
        while True:
            team_id = int(self.rng.integers(len(self.combinations)))
            combination = self.combinations[team_id]
            if not set(combination) <= self.exceptions:
                break
        team = [combination[i] for i in self.rng.permutation(len(combination))]
        return {self.env_key: {"ally_team": team, "enemy_team": list(team), "id": team_id}}


class WeightedTeamsDistribution(Distribution):
    """Each ally's type drawn independently with the given weights, the team redrawn while it holds
    only exception types (e.g. never a team of banelings only). The enemies mirror the allies; when
    there are more enemies, the extra ones are a second team drawn the same way (so it too is never
    exception types only), when fewer, the ally team is cut short. SMACv2 shuffles each draw, which
    leaves independent draws' distribution as it is, so no shuffle here."""

    def __init__(self, config: dict, rng: np.random.Generator):
        self.env_key = config["env_key"]
        self.unit_types = list(config["unit_types"])
        self.weights = np.asarray(config["weights"], dtype=float)
        self.exceptions = set(config.get("exception_unit_types", ()))
        self.n_units = config["n_units"]
        self.n_enemies = config["n_enemies"]
        self.rng = rng

    def _team(self, size: int) -> list[str]:
        while True:
            team = [self.unit_types[i] for i in self.rng.choice(len(self.unit_types), size=size, p=self.weights)]
            if not set(team) <= self.exceptions:
                return team

    def generate(self) -> EpisodeConfig:
        team = self._team(self.n_units)
        enemy_team = team[:self.n_enemies]
        if self.n_enemies > self.n_units:
            enemy_team += self._team(self.n_enemies - self.n_units)
        return {self.env_key: {"ally_team": team, "enemy_team": enemy_team, "id": 0}}


class PerAgentUniformDistribution(Distribution):
    """Per agent, one value per bound drawn uniformly in [lower_bound, upper_bound)."""

    def __init__(self, config: dict, rng: np.random.Generator):
        self.env_key = config["env_key"]
        self.lower = np.asarray(config["lower_bound"], dtype=float)
        self.upper = np.asarray(config["upper_bound"], dtype=float)
        self.n_units = config["n_units"]
        self.rng = rng

    def generate(self) -> EpisodeConfig:
        values = self.rng.uniform(self.lower, self.upper, size=(self.n_units, len(self.lower)))  # [units, bounds]
        return {self.env_key: {"item": values, "id": 0}}


class MaskDistribution(Distribution):
    """Which enemies each ally cannot see: 0 (masked) with mask_probability, else 1. SMACv2 writes
    it under "enemy_mask" whatever the config key."""

    def __init__(self, config: dict, rng: np.random.Generator):
        self.p_masked = config["mask_probability"]
        self.shape = (config["n_units"], config["n_enemies"])
        self.rng = rng

    def generate(self) -> EpisodeConfig:
        mask = self.rng.choice([0, 1], size=self.shape, p=[self.p_masked, 1.0 - self.p_masked])  # [units, enemies]
        return {"enemy_mask": {"item": mask, "id": 0}}


def _start_positions(allies: np.ndarray, enemies: np.ndarray) -> EpisodeConfig:
    return {"ally_start_positions": {"item": allies, "id": 0},
            "enemy_start_positions": {"item": enemies, "id": 0}}


class ReflectPositionDistribution(Distribution):
    """Allies uniformly in [0, map_x / 2 - 1) x [0, map_y); the enemies at the allies' points
    mirrored in the vertical line x = map_x / 2 (x -> map_x - x), the first n_enemies of them when
    there are fewer enemies; extra enemies uniformly in the right half [map_x / 2, map_x) x [0, map_y)."""

    def __init__(self, config: dict, rng: np.random.Generator):
        self.n_units = config["n_units"]
        self.n_enemies = config["n_enemies"]
        self.map_x = config["map_x"]
        self.map_y = config["map_y"]
        self.rng = rng

    def generate(self) -> EpisodeConfig:
        allies = self.rng.uniform((0, 0), (self.map_x / 2 - REFLECT_GAP, self.map_y), size=(self.n_units, 2))
        mirrored = allies[:self.n_enemies].copy()  # [min(units, enemies), 2]
        mirrored[:, 0] = self.map_x - mirrored[:, 0]
        extra = self.rng.uniform((self.map_x / 2, 0), (self.map_x, self.map_y),
                                 size=(max(self.n_enemies - self.n_units, 0), 2))
        return _start_positions(allies, np.concatenate([mirrored, extra]))  # enemies: [enemies, 2]


class SurroundedPositionDistribution(Distribution):
    """Allies all at the centre; the enemies split (multinomially, evenly in expectation) into 1 to 4
    groups, each on a different diagonal, at a uniform point of the segment from the map's corner
    to SURROUND_OFFSET short of the centre on both axes."""

    def __init__(self, config: dict, rng: np.random.Generator):
        self.n_units = config["n_units"]
        self.n_enemies = config["n_enemies"]
        half = np.array([config["map_x"], config["map_y"]]) / 2
        signs = np.array([(-1, -1), (-1, 1), (1, 1), (1, -1)])  # diagonals: towards (0, 0), (0, y), (x, y), (x, 0)
        self.centre = half
        self.corners = half + signs * half  # [4, 2]
        self.near_centre = half + signs * SURROUND_OFFSET  # [4, 2]
        self.rng = rng

    def generate(self) -> EpisodeConfig:
        n_groups = int(self.rng.integers(1, 5))
        sizes = self.rng.multinomial(self.n_enemies, np.full(n_groups, 1 / n_groups))
        t = self.rng.uniform(size=n_groups)[:, None]  # [groups, 1]: 1 = near the centre, 0 = at the corner
        diagonals = self.rng.choice(4, size=n_groups, replace=False)
        points = self.near_centre[diagonals] * t + self.corners[diagonals] * (1 - t)  # [groups, 2]
        enemies = np.repeat(points, sizes, axis=0)  # [enemies, 2]
        return _start_positions(np.tile(self.centre, (self.n_units, 1)), enemies)


class SurroundedAndReflectPositionDistribution(Distribution):
    """Reflected positions with probability p, else surrounded ones."""

    def __init__(self, config: dict, rng: np.random.Generator):
        self.p_reflect = config["p"]
        self.surrounded = SurroundedPositionDistribution(config, rng)
        self.reflect = ReflectPositionDistribution(config, rng)
        self.rng = rng

    def generate(self) -> EpisodeConfig:
        # SMACv2 draws u in [0, 1) and reflects unless u > p.
        return self.surrounded.generate() if self.rng.random() > self.p_reflect else self.reflect.generate()


DISTRIBUTIONS: dict[str, type[Distribution]] = {
    "fixed": FixedDistribution,
    "all_teams": AllTeamsDistribution,
    "weighted_teams": WeightedTeamsDistribution,
    "per_agent_uniform": PerAgentUniformDistribution,
    "mask": MaskDistribution,
    "reflect_position": ReflectPositionDistribution,
    "surrounded": SurroundedPositionDistribution,
    "surrounded_and_reflect": SurroundedAndReflectPositionDistribution,
}
# What SMACv2's StarCraft2Env reads from reset_config under each capability_config key, hence the
# distributions each key can use (the others write entries it would never read, or read wrongly).
ALLOWED_DIST_TYPES: dict[str, tuple[str, ...]] = {
    "team_gen": ("weighted_teams", "all_teams"),
    "start_positions": ("surrounded_and_reflect", "reflect_position", "surrounded"),
    "enemy_mask": ("mask",),
    "attack": ("per_agent_uniform", "fixed"),
    "health": ("per_agent_uniform", "fixed"),
}
ARMY_SIZE_KEYS = ("n_units", "n_enemies")
CAPABILITY_KEYS = (*ARMY_SIZE_KEYS, *ALLOWED_DIST_TYPES)
# The settings each distribution needs (beyond the army sizes), and those it may take.
REQUIRED_KEYS: dict[str, tuple[str, ...]] = {
    "fixed": ("items", "test_mode"),
    "all_teams": ("unit_types",),
    "weighted_teams": ("unit_types", "weights"),
    "per_agent_uniform": ("lower_bound", "upper_bound"),
    "mask": ("mask_probability",),
    "reflect_position": ("map_x", "map_y"),
    "surrounded": ("map_x", "map_y"),
    "surrounded_and_reflect": ("p", "map_x", "map_y"),
}
OPTIONAL_KEYS = {"all_teams": ("exception_unit_types",), "weighted_teams": ("exception_unit_types",)}
# The capabilities whose config also says whether the agents observe what is drawn (`observe`,
# read by SMACv2's StarCraft2Env itself).
OBSERVED_KEYS = ("team_gen", "attack", "health")
# SMACv2's wrapper writes these into every distribution's config (overwriting any given there).
WRAPPER_KEYS = ("env_key", *ARMY_SIZE_KEYS)
# Every key some distribution's config may hold.
DISTRIBUTION_CONFIG_KEYS = tuple(sorted({"dist_type", "observe", *WRAPPER_KEYS,
                                         *itertools.chain(*REQUIRED_KEYS.values(), *OPTIONAL_KEYS.values())}))


def make_distributions(capability_config: dict, rng: np.random.Generator) -> list[Distribution]:
    """One distribution per key of a checked capability_config (check_capability_config) other than
    the army sizes, in the config's order, each given its key and the army sizes as SMACv2's wrapper
    does, all drawing from `rng`. The caller's config is not modified."""
    sizes = {key: capability_config[key] for key in ARMY_SIZE_KEYS}
    return [DISTRIBUTIONS[config["dist_type"]]({**copy.deepcopy(config), "env_key": key, **sizes}, rng)
            for key, config in capability_config.items() if key not in ARMY_SIZE_KEYS]


def draw_episode_config(distributions: list[Distribution]) -> EpisodeConfig:
    """One episode's reset_config: every distribution's draw merged in order (a later entry of the
    same name replaces an earlier one, as in SMACv2's wrapper)."""
    episode: EpisodeConfig = {}
    for distribution in distributions:
        episode.update(distribution.generate())
    return episode


# --- checks --------------------------------------------------------------------------------------

def check_prob_obs_enemy(prob_obs_enemy: float) -> None:
    """ValueError in one line unless SMACv2's prob_obs_enemy (the chance that an agent observes an enemy
    another agent has seen) is a probability."""
    if isinstance(prob_obs_enemy, bool) or not isinstance(prob_obs_enemy, (int, float)) \
            or not 0.0 <= prob_obs_enemy <= 1.0:
        raise ValueError(f"prob_obs_enemy={prob_obs_enemy!r} must be a probability within [0, 1] (SMACv2's "
                         f"default 1.0; EPO: 0.0)")


def check_capability_config(capability_config: dict, map_name: str) -> None:
    """ValueError, in one line naming the key and what is allowed, for a capability_config that
    SMACv2 would refuse, fail on late, loop on forever, or play other than asked on `map_name`
    (a 10gen map or a SMACv2 scenario name)."""
    if not isinstance(capability_config, dict):
        raise ValueError(f"capability_config must map {', '.join(CAPABILITY_KEYS)} to their settings, "
                         f"not a {type(capability_config).__name__}")
    _check_known(capability_config, CAPABILITY_KEYS, "capability_config")
    if "health" in capability_config:
        raise ValueError("capability_config.health (SMACv2's per-agent death levels) is not supported by marlkit "
                         "yet; remove it (SMACv2's published scenarios do not use it)")
    for key in ARMY_SIZE_KEYS:
        _check_count(capability_config, key, "capability_config")
    if "team_gen" not in capability_config:
        raise ValueError(f"capability_config.team_gen is missing: the 10gen maps have no units of their own, "
                         f"each episode's teams are drawn by one of {', '.join(ALLOWED_DIST_TYPES['team_gen'])}")
    race = _race(map_name)
    for key, config in capability_config.items():
        if key not in ARMY_SIZE_KEYS:
            _check_distribution(key, config, capability_config, race)
    _check_scenario(capability_config, map_name)


def _race(map_name: str) -> str:
    """The race whose units a 10gen map's unit-type bits know ("protoss_gen" -> "protoss")."""
    return get_gen_map_params(gen_map_of(map_name)).map_type.removesuffix("_gen")


def _check_known(config: dict, allowed: tuple[str, ...], where: str) -> None:
    unknown = [key for key in config if key not in allowed]
    if unknown:
        raise ValueError(f"unknown key {where}.{unknown[0]}; {where} takes {', '.join(allowed)}")


def _check_count(config: dict, key: str, where: str) -> None:
    if key not in config:
        raise ValueError(f"{where}.{key} is missing: SMACv2 needs both army sizes ({', '.join(ARMY_SIZE_KEYS)})")
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where}.{key}={value!r} must be a whole number of at least 1")


def _check_distribution(key: str, config: Any, capability_config: dict, race: str) -> None:
    where = f"capability_config.{key}"
    allowed_types = ALLOWED_DIST_TYPES[key]
    if not isinstance(config, dict) or "dist_type" not in config:
        raise ValueError(f"{where} must be a mapping with a dist_type (for {key}: {', '.join(allowed_types)})")
    dist_type = config["dist_type"]
    if dist_type not in DISTRIBUTIONS:
        raise ValueError(f"unknown {where}.dist_type {dist_type!r}; known: {', '.join(DISTRIBUTIONS)} "
                         f"(for {key}: {', '.join(allowed_types)})")
    if dist_type not in allowed_types:
        raise ValueError(f"{where}.dist_type {dist_type!r} does not draw {key}; allowed: {', '.join(allowed_types)}")
    # Any key of the distributions this capability allows, so that switching dist_type on the
    # command line does not force deleting the previous one's settings.
    takes = sorted({"dist_type", *WRAPPER_KEYS, *(("observe",) if key in OBSERVED_KEYS else ()),
                    *(name for kind in allowed_types for name in REQUIRED_KEYS[kind] + OPTIONAL_KEYS.get(kind, ()))})
    _check_known(config, tuple(takes), where)
    needed = REQUIRED_KEYS[dist_type] + (("observe",) if key in OBSERVED_KEYS else ())
    missing = [name for name in needed if name not in config]
    if missing:
        raise ValueError(f"{where}.{missing[0]} is missing: {dist_type} needs {', '.join(needed)}")
    if key in OBSERVED_KEYS and not isinstance(config["observe"], bool):
        raise ValueError(f"{where}.observe={config['observe']!r} must be True or False")
    sizes = {size: capability_config[size] for size in ARMY_SIZE_KEYS}
    _VALUE_CHECKS[dist_type](config, sizes, race, where)


def _check_unit_types(config: dict, sizes: dict, race: str, where: str) -> None:
    unit_types = config["unit_types"]
    if not isinstance(unit_types, (list, tuple)) or not unit_types:
        raise ValueError(f"{where}.unit_types must be a non-empty list of 10gen_{race}'s units: "
                         f"{', '.join(RACE_UNITS[race])}")
    for name in unit_types:
        if name not in GEN_UNIT_NAMES:
            raise ValueError(f"unknown unit type {name!r} in {where}.unit_types; 10gen_{race} plays "
                             f"{', '.join(RACE_UNITS[race])} (SMACv2's nine: {', '.join(GEN_UNIT_NAMES)})")
        if name not in RACE_UNITS[race]:
            raise ValueError(f"{where}.unit_types: {name!r} is not a {race} unit, and 10gen_{race}'s unit-type "
                             f"bits only know {', '.join(RACE_UNITS[race])}")
    exceptions = config.get("exception_unit_types", [])
    if not isinstance(exceptions, (list, tuple)) or any(name not in unit_types for name in exceptions):
        raise ValueError(f"{where}.exception_unit_types={exceptions!r} must list some of unit_types "
                         f"({', '.join(unit_types)})")


def _check_all_teams(config: dict, sizes: dict, race: str, where: str) -> None:
    _check_unit_types(config, sizes, race, where)
    if set(config["unit_types"]) <= set(config.get("exception_unit_types", [])):
        raise ValueError(f"{where}.exception_unit_types: every unit type is an exception, so no team could be drawn")
    if sizes["n_enemies"] != sizes["n_units"]:
        raise ValueError(f"capability_config.n_enemies={sizes['n_enemies']} must equal n_units={sizes['n_units']} "
                         f"with {where}.dist_type all_teams, which gives the enemies the allies' team; "
                         f"weighted_teams draws other sizes")


def _check_weighted_teams(config: dict, sizes: dict, race: str, where: str) -> None:
    _check_unit_types(config, sizes, race, where)
    unit_types, weights = config["unit_types"], config["weights"]
    if not isinstance(weights, (list, tuple)) or len(weights) != len(unit_types):
        raise ValueError(f"{where}.weights={weights!r} must give one weight per unit type ({len(unit_types)}: "
                         f"{', '.join(unit_types)})")
    if not all(_is_number(w) and w >= 0 for w in weights) or not math.isclose(sum(weights), 1, abs_tol=1e-8):
        raise ValueError(f"{where}.weights={weights!r} must be probabilities (at least 0) that sum to 1")
    drawable = {name for name, weight in zip(unit_types, weights) if weight > 0}
    if drawable <= set(config.get("exception_unit_types", [])):
        raise ValueError(f"{where}.exception_unit_types: every unit type of non-zero weight is an exception, "
                         f"so no team could be drawn")


def _check_fixed(config: dict, sizes: dict, race: str, where: str) -> None:
    items = config["items"]
    if not isinstance(items, (list, tuple)) or not items or \
            any(not isinstance(item, (list, tuple)) or len(item) != sizes["n_units"] for item in items):
        raise ValueError(f"{where}.items must be a non-empty list of lists of n_units={sizes['n_units']} values "
                         f"(one per agent)")
    if not isinstance(config["test_mode"], bool):
        raise ValueError(f"{where}.test_mode={config['test_mode']!r} must be True (items in turn) or False "
                         f"(at random)")


def _check_per_agent_uniform(config: dict, sizes: dict, race: str, where: str) -> None:
    lower, upper = config["lower_bound"], config["upper_bound"]
    sequences = isinstance(lower, (list, tuple)) and isinstance(upper, (list, tuple))
    if not (sequences and lower and len(lower) == len(upper) and all(_is_number(v) for v in [*lower, *upper])
            and all(lo <= hi for lo, hi in zip(lower, upper))):
        raise ValueError(f"{where}.lower_bound={lower!r} and upper_bound={upper!r} must be lists of numbers of "
                         f"the same length, each lower bound at most its upper bound")


def _check_mask(config: dict, sizes: dict, race: str, where: str) -> None:
    _check_probability(config, "mask_probability", where)


def _check_map_size(config: dict, sizes: dict, race: str, where: str) -> None:
    for key, size in zip(("map_x", "map_y"), GEN_MAP_SIZE):
        if config[key] != size:
            raise ValueError(f"{where}.{key}={config[key]!r} must be {size}: the 10gen maps are "
                             f"{GEN_MAP_SIZE[0]} x {GEN_MAP_SIZE[1]}, and start points are drawn across map_x x map_y")


def _check_surrounded_and_reflect(config: dict, sizes: dict, race: str, where: str) -> None:
    _check_probability(config, "p", where)
    _check_map_size(config, sizes, race, where)


def _check_probability(config: dict, key: str, where: str) -> None:
    value = config[key]
    if not _is_number(value) or not 0 <= value <= 1:
        raise ValueError(f"{where}.{key}={value!r} must be a probability within [0, 1]")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_VALUE_CHECKS = {
    "fixed": _check_fixed,
    "all_teams": _check_all_teams,
    "weighted_teams": _check_weighted_teams,
    "per_agent_uniform": _check_per_agent_uniform,
    "mask": _check_mask,
    "reflect_position": _check_map_size,
    "surrounded": _check_map_size,
    "surrounded_and_reflect": _check_surrounded_and_reflect,
}


def _check_scenario(capability_config: dict, map_name: str) -> None:
    """A SMACv2 scenario name (e.g. zerg_10_vs_11) fixes the army sizes."""
    if map_name not in SMACV2_SCENARIOS:
        return
    _, n_units, n_enemies = SMACV2_SCENARIOS[map_name]
    for key, size in zip(ARMY_SIZE_KEYS, (n_units, n_enemies)):
        if capability_config[key] != size:
            race_map = gen_map_of(map_name)
            raise ValueError(f"capability_config.{key}={capability_config[key]} does not match the scenario "
                             f"{map_name} ({n_units} vs {n_enemies}); other sizes play map {race_map} "
                             f"(--env-config=sc2_gen_{race_map.removeprefix('10gen_')})")
