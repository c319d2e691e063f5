"""Unit statistics of the SMAC maps for the built-in engine.

Every number is listed with its public source in docs/unit_data.md (unit by unit); the short
tags in the comments below refer to that table's sources:
  [M]  the SMAC map files' own unit data (Base.SC2Data/GameData/UnitData.xml of the .SC2Map
       archives in oxwhirl/smac), which define the allied "RL" copies;
  [A]  StarCraft II API UnitTypeData of client 4.10/4.11 (BurnySc2/sc2-techtree data.json,
       commit c92eaf8 "Update data.json to 4.11 patch"), the stock units the enemy plays;
  [L]  Liquipedia (LotV unit pages, "Automatic Targeting", "Attack Target Priority");
  [W]  SC2 WeaponData (scan ranges, random weapon delay), as collected in the facts sheet;
  [U]  not published for 4.10: the value chosen and why are in docs/unit_data.md.

Times are in game loops (16 loops = 1 game second; SMAC's env step = 8 loops) and speeds in
world units per loop, so the engine never converts units. Allied "RL" copies share the stock
unit's numbers except where the map files differ (Hydralisk_RL 80 HP, Medivac_RL speed 2.75).
SMACv2's map has the same RL copies under raw ids of its own (GEN_ALLY_IDS).
"""
from dataclasses import dataclass, replace

from . import unit_ids as ids
from .teams import GEN_UNIT_NAMES

LOOPS_PER_GAME_SECOND = 16.0

# Attribute bit flags (SC2 attributes used by weapon bonuses).
LIGHT = 1
ARMORED = 2
BIOLOGICAL = 4
MECHANICAL = 8
MASSIVE = 16
STRUCTURE = 32

# Collision layers (the unit data's Collide flags [M]): two units push each other apart only
# when they share a layer. Ground units collide with ground units; a Colossus collides only
# with Colossi ("Collide Colossus", not "Ground": small units walk beneath it); air units
# (Medivac, "Collide Flying") are not separated (SC2 lets moving air units stack).
COLLIDE_NONE = 0
COLLIDE_GROUND = 1
COLLIDE_COLOSSUS = 2

# Splash kinds.
SPLASH_NONE = 0
SPLASH_LINE = 1      # Colossus Thermal Lances: a line across the attack direction
SPLASH_BURST = 2     # Baneling Volatile Burst: a circle around the Baneling, which dies

# Geometry of the splash kinds (world units).
LINE_SPLASH_LENGTH = 2.8   # [U] SMAClite's Thermal Lances rectangle, 2.8 x 0.3
LINE_SPLASH_WIDTH = 0.3
BURST_RADIUS = 2.2         # [L] Baneling splash radius

SHIELD_REGEN_PER_LOOP = 2.0 / LOOPS_PER_GAME_SECOND          # [M] ShieldRegenRate 2
SHIELD_REGEN_DELAY_LOOPS = 10.0 * LOOPS_PER_GAME_SECOND      # [M] ShieldRegenDelay 10
ZERG_REGEN_PER_LOOP = 0.2734 / LOOPS_PER_GAME_SECOND         # [M] LifeRegenRate 0.2734
HEAL_PER_LOOP = 9.0 / LOOPS_PER_GAME_SECOND                  # [L] Medivac Heal 12.6 HP/s faster
HEAL_ENERGY_PER_HP = 1.0 / 3.0                               # [L] 1 energy per 3 HP
HEAL_RANGE = 4.0                                             # [L]
ENERGY_REGEN_PER_LOOP = 0.5625 / LOOPS_PER_GAME_SECOND       # [M] EnergyRegenRate 0.5625
# SC2 adds a random delay to every weapon cooldown (WeaponData RandomDelayMin/Max defaults,
# -0.0625..+0.125 game-s) [W]; it desynchronises otherwise mirror-perfect battles. It is the
# engine's only source of randomness besides spawn placement.
WEAPON_RANDOM_DELAY_LOOPS = (-0.0625 * LOOPS_PER_GAME_SECOND, 0.125 * LOOPS_PER_GAME_SECOND)
# Automatic targeting [L "Automatic Targeting"]: scan range = max(5, weapon range + 0.5) for
# ground units in LotV; static defence scans its weapon range.
MIN_SCAN_RANGE = 5.0
SCAN_RANGE_MARGIN = 0.5


@dataclass(frozen=True)
class UnitStats:
    """Static numbers of one unit type; a unit without a weapon has damage 0."""

    name: str
    health: float
    shield: float
    armor: float
    attributes: int
    speed: float            # world units per game loop
    radius: float
    sight: float
    is_air: bool = False
    damage: float = 0.0     # per hit
    hits: int = 1
    bonus: float = 0.0      # added per hit when the target has bonus_attr
    bonus_attr: int = 0
    range: float = 0.0      # edge to edge
    cooldown: float = 1.0   # loops between shots
    scan_range: float = 0.0  # automatic target acquisition (edge to edge), enemies only
    hits_ground: bool = False
    hits_air: bool = False
    splash: int = SPLASH_NONE
    regen: float = 0.0      # HP per loop
    energy: float = 0.0     # start energy
    energy_max: float = 0.0
    heals: bool = False
    crosses_cliffs: bool = False
    collide: int = COLLIDE_GROUND
    priority: int = 20      # Attack Target Priority (ATP)
    always_threatens: bool = False  # counts as a threat for automatic targeting without a weapon

    @property
    def has_weapon(self) -> bool:
        return self.damage > 0.0


def _speed(game_speed: float) -> float:
    return game_speed / LOOPS_PER_GAME_SECOND


def _loops(game_seconds: float) -> float:
    return game_seconds * LOOPS_PER_GAME_SECOND


def _scan(weapon_range: float) -> float:
    return max(MIN_SCAN_RANGE, weapon_range + SCAN_RANGE_MARGIN)


# Stock units: HP, shield, armour, attributes, speed, radius, sight, weapon [A]; the unit data
# of the RL copies [M] agree wherever both exist. Cooldowns are the API's exact float values.
_MARINE = UnitStats(
    "Marine", 45, 0, 0, LIGHT | BIOLOGICAL, _speed(2.25), 0.375, 9,
    damage=6, range=5, cooldown=_loops(0.86083984375), scan_range=_scan(5),
    hits_ground=True, hits_air=True)
_MARAUDER = UnitStats(
    "Marauder", 125, 0, 1, ARMORED | BIOLOGICAL, _speed(2.25), 0.5625, 10,
    damage=10, bonus=10, bonus_attr=ARMORED, range=6, cooldown=_loops(1.5), scan_range=_scan(6),
    hits_ground=True)
# AlwaysThreatens [M: Medivac_RL FlagArray]: units target it as if it could fire back.
_MEDIVAC = UnitStats(
    "Medivac", 150, 0, 1, ARMORED | MECHANICAL, _speed(2.5), 0.75, 11, is_air=True,
    energy=50, energy_max=200, heals=True, collide=COLLIDE_NONE, always_threatens=True)
_STALKER = UnitStats(
    "Stalker", 80, 80, 1, ARMORED | MECHANICAL, _speed(2.953125), 0.625, 10,
    damage=13, bonus=5, bonus_attr=ARMORED, range=6, cooldown=_loops(1.8701171875),
    scan_range=_scan(6), hits_ground=True, hits_air=True)
_ZEALOT = UnitStats(
    "Zealot", 100, 50, 1, LIGHT | BIOLOGICAL, _speed(2.25), 0.5, 9,
    damage=8, hits=2, range=0.10009765625, cooldown=_loops(1.199951171875),
    scan_range=_scan(0.10009765625), hits_ground=True)
_COLOSSUS = UnitStats(
    "Colossus", 200, 150, 1, ARMORED | MECHANICAL | MASSIVE, _speed(2.25), 1.0, 10,
    damage=10, hits=2, bonus=5, bonus_attr=LIGHT, range=7, cooldown=_loops(1.5),
    scan_range=_scan(7), hits_ground=True, splash=SPLASH_LINE, crosses_cliffs=True,
    collide=COLLIDE_COLOSSUS)
_HYDRALISK = UnitStats(
    "Hydralisk", 90, 0, 0, LIGHT | BIOLOGICAL, _speed(2.25), 0.625, 9,
    damage=12, range=5, cooldown=_loops(0.824951171875), scan_range=_scan(5),
    hits_ground=True, hits_air=True, regen=ZERG_REGEN_PER_LOOP)
_ZERGLING = UnitStats(
    "Zergling", 35, 0, 0, LIGHT | BIOLOGICAL, _speed(2.953125), 0.375, 8,
    damage=5, range=0.10009765625, cooldown=_loops(0.696044921875),
    scan_range=_scan(0.10009765625), hits_ground=True, regen=ZERG_REGEN_PER_LOOP)
# Volatile Burst [L]: 16 (+19 vs Light) in 4.10 ([U]: an older Liquipedia snapshot shows
# 20 +15; both are 35 vs Light), splash 2.2, contact range 0.25, also on death, no friendly
# fire. The +80 vs structures is left out: no Baneling map has structures.
_BANELING = UnitStats(
    "Baneling", 30, 0, 0, BIOLOGICAL, _speed(2.5), 0.375, 8,
    damage=16, bonus=19, bonus_attr=LIGHT, range=0.25, scan_range=_scan(0.25), hits_ground=True,
    splash=SPLASH_BURST, regen=ZERG_REGEN_PER_LOOP)
# Static defence: it scans its weapon range [L]; it is a structure and never moves.
_SPINE_CRAWLER = UnitStats(
    "SpineCrawler", 300, 0, 2, ARMORED | BIOLOGICAL | STRUCTURE, 0.0, 1.125, 11,
    damage=25, bonus=5, bonus_attr=ARMORED, range=7, cooldown=_loops(1.85009765625), scan_range=7,
    hits_ground=True, regen=ZERG_REGEN_PER_LOOP)


def _renamed(stats: UnitStats, name: str, **changes) -> UnitStats:
    return replace(stats, name=name, **changes)


UNIT_STATS: dict[int, UnitStats] = {
    ids.MARINE: _MARINE,
    ids.MARAUDER: _MARAUDER,
    ids.MEDIVAC: _MEDIVAC,
    ids.ZEALOT: _ZEALOT,
    ids.STALKER: _STALKER,
    ids.COLOSSUS: _COLOSSUS,
    ids.HYDRALISK: _HYDRALISK,
    ids.ZERGLING: _ZERGLING,
    ids.BANELING: _BANELING,
    ids.SPINE_CRAWLER: _SPINE_CRAWLER,
    ids.MARINE_RL: _renamed(_MARINE, "Marine_RL"),
    ids.MARAUDER_RL: _renamed(_MARAUDER, "Marauder_RL"),
    ids.MEDIVAC_RL: _renamed(_MEDIVAC, "Medivac_RL", speed=_speed(2.75)),       # [M]
    ids.ZEALOT_RL: _renamed(_ZEALOT, "Zealot_RL"),
    ids.STALKER_RL: _renamed(_STALKER, "Stalker_RL"),
    ids.COLOSSUS_RL: _renamed(_COLOSSUS, "Colossus_RL"),
    ids.HYDRALISK_RL: _renamed(_HYDRALISK, "Hydralisk_RL", health=80),         # [M]
    ids.ZERGLING_RL: _renamed(_ZERGLING, "Zergling_RL"),
    ids.BANELING_RL: _renamed(_BANELING, "Baneling_RL"),
}


# SMACv2's map (32x32_flat.SC2Map) defines the same nine RL copies as SMAC's maps, element for
# element (Colosus_RL as in 1c3s5z), and touches the stock Marine as SMAC's marine maps do (Food 0):
# its units have the numbers above (docs/unit_data.md, "SMACv2"), under the map's own raw ids,
# GEN_RL_BASE on in the order of teams.GEN_UNIT_NAMES. Its enemies are the stock units.
GEN_ALLY_IDS: dict[str, int] = {name: ids.GEN_RL_BASE + k for k, name in enumerate(GEN_UNIT_NAMES)}
_SMAC_RL_ID_OF_NAME = {"baneling": ids.BANELING_RL, "colossus": ids.COLOSSUS_RL, "hydralisk": ids.HYDRALISK_RL,
                       "marauder": ids.MARAUDER_RL, "marine": ids.MARINE_RL, "medivac": ids.MEDIVAC_RL,
                       "stalker": ids.STALKER_RL, "zealot": ids.ZEALOT_RL, "zergling": ids.ZERGLING_RL}
UNIT_STATS.update({GEN_ALLY_IDS[name]: UNIT_STATS[_SMAC_RL_ID_OF_NAME[name]] for name in GEN_UNIT_NAMES})


def get_unit_stats(unit_type: int) -> UnitStats:
    """Statistics of a raw unit type id from envs.starcraft.game.unit_ids."""
    try:
        return UNIT_STATS[int(unit_type)]
    except KeyError:
        known = sorted(UNIT_STATS)
        raise ValueError(f"unknown unit type id {unit_type!r}; known ids: {known}") from None


def can_hit(attacker: UnitStats, target: UnitStats) -> bool:
    """Whether the attacker's weapon can hit the target's plane (Colossus counts as ground)."""
    return attacker.hits_air if target.is_air else attacker.hits_ground


def damage_per_hit(attacker: UnitStats, target: UnitStats) -> float:
    """Damage of one hit before armour: base plus the bonus when the target has the attribute."""
    bonus = attacker.bonus if attacker.bonus_attr & target.attributes else 0.0
    return attacker.damage + bonus
