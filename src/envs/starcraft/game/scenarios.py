"""Static description of the 23 SMAC maps and SMACv2's three generated maps for the built-in
engine: who spawns where, what the enemy is ordered to do, and the terrain (facts sheet §8, §11,
§12; SMACv2: docs/unit_data.md, "SMACv2").

Everything here is independent of the episode limit and reward settings; the map registry
(n_agents, limits, races, unit-type bits) is `envs.starcraft.game.maps`. `get_scenario(name)` returns
one immutable `Scenario`; the engine reads it at construction and on every reset.

Coordinates are world coordinates (one unit = one pathing cell); grids are indexed [x][y] with
y pointing north, so `pathing_grid[int(x)][int(y)]` is the cell under a unit at (x, y).
"""
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from . import unit_ids as ids
from .units import LOOPS_PER_GAME_SECOND

MAP_X = 32
MAP_Y = 32

Point = tuple[float, float]
# Pathable rows of a layout: (y_first, y_last inclusive, ((x_start, x_stop exclusive), ...)).
RowSpec = tuple[tuple[int, int, tuple[tuple[int, int], ...]], ...]


@dataclass(frozen=True)
class EnemyOrder:
    """The order the map script gives every enemy unit when the armies spawn.

    kind:
      "attack_move"                attack-move to points[0];
      "attack_move_random_between" attack-move to one uniformly random point on the segment
                                   points[0]..points[1], drawn once per spawn for the whole group;
      "attack_units"               attack order on the allied units whose creation indices are in
                                   `targets` (the enemies path to them and fight);
      "attack_nearest"             SMACv2's periodic trigger: every `period` game loops from the
                                   spawn, each enemy without an order is ordered to attack the
                                   ally nearest to it (centre to centre, any ally); the order fails,
                                   leaving the enemy idle, where its weapon cannot hit that ally;
      "none"                       no order (a static defence that only auto-attacks).
    """

    kind: str
    points: tuple[Point, ...] = ()
    targets: tuple[int, ...] = ()
    period: int = 0


@dataclass(frozen=True, eq=False)
class Scenario:
    """One map's armies, enemy order and terrain.

    name: the SMAC map name.
    layout: terrain layout name (facts sheet §11): "band", "open", "octagon", "2s_vs_1sc",
        "6h_vs_8z", "corridor", "so_many_baneling" or "2c_vs_64zg".
    ally_types / enemy_types: raw unit-type ids (envs.starcraft.game.unit_ids; RL ids for allies,
        stock ids for enemies), one per unit in map-script creation order.
    ally_spawns / enemy_spawns: the script point (x, y) each unit is created at, aligned with
        the types. Units of one group share a point: the engine puts the first on it and the
        others nearby without overlap, as SC2 does.
    enemy_order: see EnemyOrder.
    generated: SMACv2's maps: no fixed armies (the type and spawn tuples are empty); the engine
        creates the armies of a teams.Team at every reset.
    pathing_grid: bool [MAP_X, MAP_Y], True = ground units may walk there (read-only).
    terrain_height: float64 [MAP_X, MAP_Y] in [0, 1] (read-only). The real maps' absolute
        heights were not derived, so this is an approximation that keeps the order of the
        cliff levels: void 0.25, arena level 0.5, raised plateaus 0.75, cliffs and ramps
        in between.
    """

    name: str
    layout: str
    ally_types: tuple[int, ...]
    ally_spawns: tuple[Point, ...]
    enemy_types: tuple[int, ...]
    enemy_spawns: tuple[Point, ...]
    enemy_order: EnemyOrder
    pathing_grid: np.ndarray
    terrain_height: np.ndarray
    map_x: int = MAP_X
    map_y: int = MAP_Y
    generated: bool = False

    @property
    def n_allies(self) -> int:
        return len(self.ally_types)

    @property
    def n_enemies(self) -> int:
        return len(self.enemy_types)


# ------------------------------------------------------------------------------------------
# Terrain layouts (facts sheet §11).

_LAYOUT_ROWS: dict[str, RowSpec] = {
    "band": ((8, 23, ((0, 32),)),),
    "open": ((0, 31, ((0, 32),)),),
    "octagon": ((6, 7, ((10, 22),)), (8, 9, ((8, 24),)), (10, 21, ((6, 26),)),
                (22, 23, ((8, 24),)), (24, 25, ((10, 22),))),
    "corridor": ((2, 11, ((2, 12),)), (12, 13, ((12, 14),)), (14, 15, ((14, 26),)),
                 (16, 17, ((14, 28),)), (18, 21, ((12, 30),)), (22, 23, ((14, 30),)),
                 (24, 25, ((16, 30),)), (26, 27, ((18, 30),)), (28, 29, ((20, 30),))),
    "so_many_baneling": ((2, 3, ((2, 8),)), (4, 7, ((2, 12),)), (8, 11, ((4, 16),)),
                         (12, 15, ((8, 20),)), (16, 17, ((10, 20),)), (18, 21, ((14, 26),)),
                         (22, 23, ((16, 30),)), (24, 27, ((20, 30),)), (28, 29, ((22, 30),))),
    "2c_vs_64zg": ((6, 7, ((4, 28),)), (8, 9, ((2, 30),)), (10, 11, ((0, 32),)),
                   (12, 13, ((0, 4), (28, 32))), (14, 15, ((0, 32),)), (16, 17, ((2, 30),)),
                   (18, 19, ((8, 24),))),
}

# Maps with a raised plateau inside a cliff ring: the plateau (where the fight happens) and
# the low ground outside the ring, which is pathable but unreachable from the plateau.
_PLATEAU_ROWS: dict[str, RowSpec] = {
    "2s_vs_1sc": ((8, 19, ((8, 20),)), (20, 21, ((10, 18),)), (22, 23, ((12, 16),))),
    "6h_vs_8z": ((8, 9, ((10, 20),)), (10, 17, ((8, 22),)), (18, 19, ((10, 20),))),
}
_OUTER_ROWS: dict[str, RowSpec] = {
    "2s_vs_1sc": ((0, 5, ((0, 32),)), (6, 21, ((0, 6), (22, 32))), (22, 23, ((0, 8), (20, 32))),
                  (24, 25, ((0, 10), (18, 32))), (26, 31, ((0, 32),))),
    "6h_vs_8z": ((0, 5, ((0, 32),)), (6, 7, ((0, 8), (22, 32))), (8, 19, ((0, 6), (24, 32))),
                 (20, 21, ((0, 8), (22, 32))), (22, 31, ((0, 32),))),
}

# Cliff levels (t3SyncCliffLevel / 64): 0 void, 1 arena, 2 raised platform.
_VOID, _ARENA, _RAISED = 0.0, 1.0, 2.0
_CLIFF = 1.5  # unpathable cliff cells between two levels
# 2c_vs_64zg ramps climb from the side lanes to the upper platform in three steps (72/88/104).
_RAMP_STEPS = (72 / 64, 88 / 64, 104 / 64)


def _mask(rows: RowSpec) -> np.ndarray:
    """Cells covered by a row spec -> bool [MAP_X, MAP_Y]."""
    mask = np.zeros((MAP_X, MAP_Y), dtype=bool)
    for y_first, y_last, spans in rows:
        for x_start, x_stop in spans:
            mask[x_start:x_stop, y_first:y_last + 1] = True
    return mask


def _cliff_levels(layout: str, pathable: np.ndarray) -> np.ndarray:
    """Approximate cliff level of every cell -> float [MAP_X, MAP_Y]."""
    if layout == "open":
        return np.full((MAP_X, MAP_Y), _ARENA)
    if layout in _PLATEAU_ROWS:
        levels = np.full((MAP_X, MAP_Y), _CLIFF)
        levels[_mask(_OUTER_ROWS[layout])] = _ARENA
        levels[_mask(_PLATEAU_ROWS[layout])] = _RAISED
        return levels
    levels = np.where(pathable, _ARENA, _VOID)
    if layout == "2c_vs_64zg":
        levels[4:28, 12:14] = _CLIFF
        upper = np.zeros_like(pathable)
        upper[7:25, 14:20] = True
        levels[upper & pathable] = _RAISED
        for step, level in enumerate(_RAMP_STEPS):
            for x in (4 + step, 27 - step):
                levels[x, 14:18] = level
    return levels


def _terrain(layout: str) -> tuple[np.ndarray, np.ndarray]:
    """(pathing_grid bool, terrain_height float in [0, 1]), both read-only [MAP_X, MAP_Y]."""
    if layout in _PLATEAU_ROWS:
        pathable = _mask(_PLATEAU_ROWS[layout]) | _mask(_OUTER_ROWS[layout])
    else:
        pathable = _mask(_LAYOUT_ROWS[layout])
    height = 0.25 + 0.25 * _cliff_levels(layout, pathable)
    pathable.setflags(write=False)
    height.setflags(write=False)
    return pathable, height


# ------------------------------------------------------------------------------------------
# Armies (map scripts, facts sheet §11): groups of (count, unit type, spawn point) in creation
# order, and the enemy order.

Group = tuple[int, int, Point]

_TEAM_1: Point = (9.0, 16.0)
_TEAM_2: Point = (23.0, 16.0)
_TO_TEAM_1 = EnemyOrder("attack_move", (_TEAM_1,))
_NE_CORNER: Point = (27.91, 28.24)
_TO_SW_SQUARE = EnemyOrder("attack_move", ((4.47, 4.3298),))


@dataclass(frozen=True)
class _MapSpec:
    layout: str
    allies: tuple[Group, ...]
    enemies: tuple[Group, ...]
    order: EnemyOrder


def _team_fight(allies: tuple[tuple[int, int], ...], enemies: tuple[tuple[int, int], ...],
                layout: str = "band") -> _MapSpec:
    """The common setup: allies at "Team 1", enemies at "Team 2" attack-moving to Team 1."""
    return _MapSpec(layout,
                    tuple((count, unit, _TEAM_1) for count, unit in allies),
                    tuple((count, unit, _TEAM_2) for count, unit in enemies),
                    _TO_TEAM_1)


def _marines(n_allies: int, n_enemies: int) -> _MapSpec:
    return _team_fight(((n_allies, ids.MARINE_RL),), ((n_enemies, ids.MARINE),))


def _mmm(n_marines: int, n_marauders: int) -> _MapSpec:
    return _team_fight(((7, ids.MARINE_RL), (2, ids.MARAUDER_RL), (1, ids.MEDIVAC_RL)),
                       ((n_marines, ids.MARINE), (n_marauders, ids.MARAUDER), (1, ids.MEDIVAC)))


def _protoss(n_stalkers: int, n_zealots: int, n_enemy_zealots: int) -> _MapSpec:
    return _team_fight(((n_stalkers, ids.STALKER_RL), (n_zealots, ids.ZEALOT_RL)),
                       ((n_stalkers, ids.STALKER), (n_enemy_zealots, ids.ZEALOT)))


def _stalkers_vs_zealots(n_zealots: int) -> _MapSpec:
    return _team_fight(((3, ids.STALKER_RL),), ((n_zealots, ids.ZEALOT),), layout="open")


_MAPS: dict[str, _MapSpec] = {
    "3m": _marines(3, 3),
    "8m": _marines(8, 8),
    "25m": _marines(25, 25),
    "5m_vs_6m": _marines(5, 6),
    "8m_vs_9m": _marines(8, 9),
    "10m_vs_11m": _marines(10, 11),
    "27m_vs_30m": _marines(27, 30),
    "MMM": _mmm(7, 2),
    "MMM2": _mmm(8, 3),
    "2s3z": _protoss(2, 3, 3),
    "3s5z": _protoss(3, 5, 5),
    "3s5z_vs_3s6z": _protoss(3, 5, 6),
    "3s_vs_3z": _stalkers_vs_zealots(3),
    "3s_vs_4z": _stalkers_vs_zealots(4),
    "3s_vs_5z": _stalkers_vs_zealots(5),
    "1c3s5z": _team_fight(((1, ids.COLOSSUS_RL), (3, ids.STALKER_RL), (5, ids.ZEALOT_RL)),
                          ((1, ids.COLOSSUS), (3, ids.STALKER), (5, ids.ZEALOT))),
    "2m_vs_1z": _MapSpec("octagon",
                         ((1, ids.MARINE_RL, (13.0, 12.0)), (1, ids.MARINE_RL, (19.0, 12.0))),
                         ((1, ids.ZEALOT, (16.0, 19.0)),),
                         EnemyOrder("attack_move_random_between", ((13.0, 12.0), (19.0, 12.0)))),
    "corridor": _MapSpec("corridor", ((6, ids.ZEALOT_RL, (19.0397, 19.1198)),),
                         ((24, ids.ZERGLING, _NE_CORNER),), _TO_SW_SQUARE),
    "6h_vs_8z": _MapSpec("6h_vs_8z", ((6, ids.HYDRALISK_RL, (14.5998, 9.49)),),
                         ((8, ids.ZEALOT, (14.41, 16.7597)),),
                         EnemyOrder("attack_move", ((14.5998, 9.49),))),
    "2s_vs_1sc": _MapSpec("2s_vs_1sc",
                          ((1, ids.STALKER_RL, (11.1208, 10.338)),
                           (1, ids.STALKER_RL, (16.976, 10.3662))),
                          ((1, ids.SPINE_CRAWLER, (13.92, 20.0397)),),
                          EnemyOrder("none")),
    "so_many_baneling": _MapSpec("so_many_baneling", ((7, ids.ZEALOT_RL, (11.469, 12.0234)),),
                                 ((32, ids.BANELING, _NE_CORNER),), _TO_SW_SQUARE),
    "bane_vs_bane": _MapSpec("octagon",
                             ((20, ids.ZERGLING_RL, (16.0, 11.0)),
                              (4, ids.BANELING_RL, (16.0, 8.0))),
                             ((20, ids.ZERGLING, (16.0, 21.0)), (4, ids.BANELING, (16.0, 24.0))),
                             EnemyOrder("attack_move", ((16.0, 8.0),))),
    "2c_vs_64zg": _MapSpec("2c_vs_64zg",
                           ((1, ids.COLOSSUS_RL, (16.0, 16.0)), (1, ids.COLOSSUS_RL, (16.0, 16.0))),
                           ((64, ids.ZERGLING, (16.0, 9.0)),),
                           EnemyOrder("attack_units", targets=(0, 1))),
}

MAP_NAMES: tuple[str, ...] = tuple(_MAPS)

# SMACv2's three maps all play on 32x32_flat.SC2Map (SMACv2's smac_maps.py "map_name"), whose
# terrain (t3CellFlags, t3SyncCliffLevel, t3SyncHeightMap, t3HeightMap, MapInfo) is byte for byte
# that of 3s_vs_3z: every cell walkable, one cliff level, playable area the whole 32 x 32 map.
# Its script creates no units (SMACv2 does, from the drawn team); its one order is a trigger every
# 0.5 game seconds (MapScript.galaxy gt_Attack).
_GEN_ORDER = EnemyOrder("attack_nearest", period=round(0.5 * LOOPS_PER_GAME_SECOND))
GEN_SCENARIO_NAMES: tuple[str, ...] = ("10gen_protoss", "10gen_terran", "10gen_zerg")


def _expand(groups: tuple[Group, ...]) -> tuple[tuple[int, ...], tuple[Point, ...]]:
    """Groups -> (one unit type per unit, one spawn point per unit), creation order kept."""
    types = tuple(unit for count, unit, _ in groups for _ in range(count))
    spawns = tuple(point for count, _, point in groups for _ in range(count))
    return types, spawns


def get_scenario(map_name: str) -> Scenario:
    """The Scenario of a SMAC map or a SMACv2 map (shared, immutable: copy the arrays to modify
    them)."""
    if isinstance(map_name, str) and map_name in _MAPS:
        return _build_scenario(map_name)
    if isinstance(map_name, str) and map_name in GEN_SCENARIO_NAMES:
        return _build_gen_scenario(map_name)
    raise ValueError(f"unknown map {map_name!r}; SMACv2's maps: {', '.join(GEN_SCENARIO_NAMES)}; "
                     f"known maps: {', '.join(MAP_NAMES)}")


@lru_cache(maxsize=None)
def _build_gen_scenario(map_name: str) -> Scenario:
    pathing_grid, terrain_height = _terrain("open")
    return Scenario(name=map_name, layout="open", ally_types=(), ally_spawns=(), enemy_types=(),
                    enemy_spawns=(), enemy_order=_GEN_ORDER, pathing_grid=pathing_grid,
                    terrain_height=terrain_height, generated=True)


@lru_cache(maxsize=None)
def _build_scenario(map_name: str) -> Scenario:
    spec = _MAPS[map_name]
    ally_types, ally_spawns = _expand(spec.allies)
    enemy_types, enemy_spawns = _expand(spec.enemies)
    pathing_grid, terrain_height = _terrain(spec.layout)
    return Scenario(name=map_name, layout=spec.layout,
                    ally_types=ally_types, ally_spawns=ally_spawns,
                    enemy_types=enemy_types, enemy_spawns=enemy_spawns,
                    enemy_order=spec.order,
                    pathing_grid=pathing_grid, terrain_height=terrain_height)
