"""Fake engines for testing the SMAC game logic without the built-in simulator.

They follow the engine contract (reset/step returning a Units-like table, map geometry
attributes) but move nothing on their own: tests script every state, the benchmark engine
jitters positions and deals random damage so that episodes end.
"""
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from envs.starcraft.game import unit_ids as ids

# (health_max, shield_max) per raw type (SMAC facts sheet §9).
VITALS = {
    ids.MARINE: (45, 0), ids.MARAUDER: (125, 0), ids.MEDIVAC: (150, 0), ids.STALKER: (80, 80),
    ids.ZEALOT: (100, 50), ids.COLOSSUS: (200, 150), ids.ZERGLING: (35, 0), ids.BANELING: (30, 0),
    ids.SPINE_CRAWLER: (300, 0), ids.MARINE_RL: (45, 0), ids.MARAUDER_RL: (125, 0),
    ids.MEDIVAC_RL: (150, 0), ids.STALKER_RL: (80, 80), ids.ZEALOT_RL: (100, 50),
    ids.COLOSSUS_RL: (200, 150), ids.HYDRALISK_RL: (80, 0), ids.ZERGLING_RL: (35, 0),
    ids.BANELING_RL: (30, 0), 1000: (80, 80), 1001: (100, 50),
}

# Armies (raw types, creation order) of the maps the tests drive.
ARMIES = {
    "3m": ([ids.MARINE_RL] * 3, [ids.MARINE] * 3),
    "2s3z": ([ids.STALKER_RL] * 2 + [ids.ZEALOT_RL] * 3, [ids.STALKER] * 2 + [ids.ZEALOT] * 3),
    "MMM": ([ids.MARAUDER_RL] * 2 + [ids.MARINE_RL] * 7 + [ids.MEDIVAC_RL],
            [ids.MARINE] * 7 + [ids.MARAUDER] * 2 + [ids.MEDIVAC]),
    "1c3s5z": ([ids.COLOSSUS_RL] + [ids.STALKER_RL] * 3 + [ids.ZEALOT_RL] * 5,
               [ids.COLOSSUS] + [ids.STALKER] * 3 + [ids.ZEALOT] * 5),
    "bane_vs_bane": ([ids.ZERGLING_RL] * 20 + [ids.BANELING_RL] * 4,
                     [ids.ZERGLING] * 20 + [ids.BANELING] * 4),
    "2m_vs_1z": ([ids.MARINE_RL] * 2, [ids.ZEALOT]),
    "corridor": ([ids.ZEALOT_RL] * 6, [ids.ZERGLING] * 24),
}


@dataclass
class FakeUnits:
    """The contract's unit table: one row per unit, allies first."""

    n_allies: int
    n_enemies: int
    unit_type: np.ndarray
    x: np.ndarray
    y: np.ndarray
    health: np.ndarray
    health_max: np.ndarray
    shield: np.ndarray
    shield_max: np.ndarray
    energy: np.ndarray
    weapon_cooldown: np.ndarray
    alive: np.ndarray

    def copy(self) -> "FakeUnits":
        return replace(self, **{f: getattr(self, f).copy() for f in _ARRAY_FIELDS})

    def kill(self, row: int) -> None:
        self.health[row] = self.shield[row] = 0.0
        self.alive[row] = False


_ARRAY_FIELDS = ("unit_type", "x", "y", "health", "health_max", "shield", "shield_max", "energy",
                 "weapon_cooldown", "alive")


def make_units(allies: Sequence[dict], enemies: Sequence[dict]) -> FakeUnits:
    """Units from dicts with keys type, x, y and optional hp, sh, cd, energy, dead (full by default)."""
    rows = list(allies) + list(enemies)
    vitals = [VITALS[r["type"]] for r in rows]
    dead = np.array([bool(r.get("dead", False)) for r in rows], dtype=bool)
    health = np.array([r.get("hp", v[0]) for r, v in zip(rows, vitals)], dtype=np.float64)
    shield = np.array([r.get("sh", v[1]) for r, v in zip(rows, vitals)], dtype=np.float64)
    return FakeUnits(
        n_allies=len(allies), n_enemies=len(enemies),
        unit_type=np.array([r["type"] for r in rows], dtype=np.int64),
        x=np.array([r["x"] for r in rows], dtype=np.float64),
        y=np.array([r["y"] for r in rows], dtype=np.float64),
        health=np.where(dead, 0.0, health), health_max=np.array([v[0] for v in vitals], dtype=np.float64),
        shield=np.where(dead, 0.0, shield), shield_max=np.array([v[1] for v in vitals], dtype=np.float64),
        energy=np.array([r.get("energy", 0.0) for r in rows], dtype=np.float64),
        weapon_cooldown=np.array([r.get("cd", 0.0) for r in rows], dtype=np.float64),
        alive=~dead,
    )


def spawn_army(map_name: str, ally_xy: tuple[float, float] = (9, 16),
               enemy_xy: tuple[float, float] = (14, 16)) -> FakeUnits:
    """Full-health armies of `map_name` in columns around two points (band-map pathable)."""
    ally_types, enemy_types = ARMIES[map_name]

    def column(types, x0, y0):
        return [{"type": t, "x": x0 + 0.5 * (i // 8), "y": y0 - 3.5 + (i % 8), "energy": 50.0}
                for i, t in enumerate(types)]

    return make_units(column(ally_types, *ally_xy), column(enemy_types, *enemy_xy))


def band_pathing() -> np.ndarray:
    """bool [32, 32] indexed [x, y]: the band maps' arena y 8..23."""
    grid = np.zeros((32, 32), dtype=bool)
    grid[:, 8:24] = True
    return grid


class FakeEngine:
    """Scripted engine: reset() returns `start`; step() records the orders, returns `script(n, units)`."""

    map_x = map_y = 32
    max_distance_x = max_distance_y = 32.0

    def __init__(self, start: FakeUnits, script: Callable[[int, FakeUnits], FakeUnits] | None = None,
                 pathing: np.ndarray | None = None):
        self.start = start
        self.script = script
        self.pathing_grid = band_pathing() if pathing is None else pathing
        self.terrain_height = np.full((32, 32), 0.5)
        self.orders: list[tuple[np.ndarray, ...]] = []
        self.last_attacks: list[tuple[int, int]] = []
        self.units = start.copy()
        self.n_steps = 0
        self.closed = False

    def reset(self) -> FakeUnits:
        self.units = self.start.copy()
        self.n_steps = 0
        return self.units

    def step(self, kind, tx, ty, target) -> FakeUnits:
        self.orders.append((kind.copy(), tx.copy(), ty.copy(), target.copy()))
        self.n_steps += 1
        if self.script is not None:
            self.units = self.script(self.n_steps, self.units.copy())
        return self.units

    def close(self) -> None:
        self.closed = True


class DriftEngine(FakeEngine):
    """Benchmark engine: units drift and random alive units lose health, so episodes end."""

    def __init__(self, start: FakeUnits, seed: int = 0, damage: float = 4.0):
        super().__init__(start)
        self.rng = np.random.default_rng(seed)
        self.damage = damage

    def step(self, kind, tx, ty, target) -> FakeUnits:
        units = self.units
        n = units.x.shape[0]
        units.x += self.rng.uniform(-0.3, 0.3, n)
        units.y += self.rng.uniform(-0.3, 0.3, n)
        np.clip(units.y, 9.0, 22.0, out=units.y)
        hit = self.rng.integers(n, size=2)
        units.health[hit] -= self.damage
        dead = units.health <= 0
        units.health[dead] = units.shield[dead] = 0.0
        units.alive &= ~dead
        units.weapon_cooldown = np.maximum(units.weapon_cooldown - 8, 0)
        return units


# Health and shield of SMACv2's nine unit types by name (the RL copies and the stock units agree).
GEN_VITALS = {"stalker": (80, 80), "zealot": (100, 50), "colossus": (200, 150), "marine": (45, 0),
              "marauder": (125, 0), "medivac": (150, 0), "zergling": (35, 0), "hydralisk": (90, 0),
              "baneling": (30, 0)}


class GenFakeEngine(FakeEngine):
    """Scripted engine for SMACv2's maps: reset(team) creates the team's units at their points (full
    health, allies as RL ids GEN_RL_BASE + index, enemies as stock units) on an open 32x32 map."""

    def __init__(self, script: Callable[[int, FakeUnits], FakeUnits] | None = None):
        from envs.starcraft.game.teams import GEN_UNIT_NAMES

        super().__init__(make_units([], []), script, pathing=np.ones((32, 32), dtype=bool))
        self.ally_unit_ids = {name: ids.GEN_RL_BASE + i for i, name in enumerate(GEN_UNIT_NAMES)}
        self.teams = []

    def reset(self, team=None) -> FakeUnits:
        self.teams.append(team)
        allies = [self._row(name, xy, self.ally_unit_ids[name]) for name, xy in zip(team.ally_units, team.ally_xy)]
        enemies = [self._row(name, xy, ids.STOCK_ID_OF_NAME[name]) for name, xy in zip(team.enemy_units, team.enemy_xy)]
        for row in allies + enemies:
            VITALS.setdefault(row["type"], GEN_VITALS[row.pop("name")])
            row.pop("name", None)
        self.start = make_units(allies, enemies)
        return super().reset()

    @staticmethod
    def _row(name: str, xy, unit_type: int) -> dict:
        return {"type": unit_type, "x": float(xy[0]), "y": float(xy[1]), "name": name}
