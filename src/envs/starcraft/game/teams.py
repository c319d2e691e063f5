"""SMACv2's per-episode teams: which units each side gets and where the game creates them.

SMACv2 (oxwhirl/smacv2) plays its procedurally generated scenarios on one empty 32x32 map and
creates both armies at every reset, from a `Team` drawn by its capability distributions
(envs/starcraft/interface/distributions.py). This module is the contract between the game logic
(envs/starcraft/interface/starcraft2_v2.py), which draws the team, and the engines that create it:
`engine.reset(team)` returns the unit table with the allies first, in `team.ally_units` order,
then the enemies in `team.enemy_units` order, each created at its point (units sharing a point
are placed next to one another, as StarCraft II places them).

Units are named as SMACv2's configs name them ("stalker", "zergling", ...). The allies are the
map's "RL" copies, whose raw type ids an engine reports in `engine.ally_unit_ids`
(name -> id); the enemies are the game's stock units (envs.starcraft.game.unit_ids).
"""
from dataclasses import dataclass

# The nine unit types of SMACv2, in the order of the map's unit data (SMACv2's 32x32_flat.SC2Map,
# Base.SC2Data/GameData/UnitData.xml): StarCraft II numbers custom units after its own in this
# order, so the allies' raw ids are consecutive in it.
GEN_UNIT_NAMES: tuple[str, ...] = ("baneling", "colossus", "hydralisk", "marauder", "marine", "medivac",
                                   "stalker", "zealot", "zergling")

# The unit types each race's scenarios draw from, in the order of their unit-type bits
# (SMACv2's get_unit_type_id for the protoss_gen, terran_gen and zerg_gen map types).
RACE_UNITS: dict[str, tuple[str, str, str]] = {
    "protoss": ("stalker", "zealot", "colossus"),
    "terran": ("marine", "marauder", "medivac"),
    "zerg": ("zergling", "hydralisk", "baneling"),
}

Point = tuple[float, float]


@dataclass(frozen=True)
class Team:
    """Both armies of one episode: unit names and creation points, in creation order."""

    ally_units: tuple[str, ...]
    ally_xy: tuple[Point, ...]
    enemy_units: tuple[str, ...]
    enemy_xy: tuple[Point, ...]

    def __post_init__(self) -> None:
        for side, names, points in (("ally", self.ally_units, self.ally_xy),
                                    ("enemy", self.enemy_units, self.enemy_xy)):
            if len(names) != len(points):
                raise ValueError(f"Team: {len(names)} {side} units but {len(points)} {side} positions")
            unknown = sorted(set(names) - set(GEN_UNIT_NAMES))
            if unknown:
                raise ValueError(f"Team: unknown unit type(s) {unknown}; known: {', '.join(GEN_UNIT_NAMES)}")
