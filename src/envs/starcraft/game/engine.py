"""Built-in combat engine: a NumPy simulation of SC2 micro on the SMAC maps and SMACv2's
generated maps (armies created from a teams.Team at every reset).

What it models, how, and from which sources is written up in docs/simulator.md; the unit
numbers and their sources are in docs/unit_data.md (units.py).

The engine advances the game in ticks of `LOOPS_PER_TICK` game loops (a divisor of step_mul).
Within a tick every unit decides once (target, movement), but shots are timed to the exact
game loop: a unit whose weapon comes off cooldown (or which arrives in range) at loop offset t of
the tick fires at t, and all shots of a tick are resolved in time order, so a unit killed at
loop t does not fire later in that tick. Everything else works on whole arrays of units.

Mechanisms (each from the game's data or its documented rules, none fitted to win rates):
- collision: units of one collision layer (units.py: ground units, or Colossi among
  themselves; a Colossus walks over small units) never overlap by more than COLLISION_TOL
  after a tick. Who gives way follows SC2's pushing rules: a moving unit pushes idle friendly
  units aside, and friends moving its way push one another, but never enemies, nor friends
  that stand attacking. Movers avoid what they
  cannot push (_steer: walk round the group it stands in, along the tangent on the side of
  the shorter way to the goal; stop at the first contact, the movers' steps settled
  together), melee units closing on a crowded target take a free place round it
  (_surround), and a constraint solver (_separate) resolves what is left;
- terrain: straight lines where nothing is in the way, else the shortest path on the cell grid
  (a breadth-first flow field); a diagonal staircase of blocked cells is a 45-degree cliff cut
  through those cells (_cell_parts), which keeps corridor's 2x2 choke passable;
- the computer player's attack-move follows SC2's automatic targeting (Liquipedia "Automatic
  Targeting"): targets that can fire back (or carry AlwaysThreatens, the Medivac) first, then the
  highest Attack Target Priority, then the nearest, within the weapon's scan range; a target is
  kept while it is valid and in weapon range; a unit attacked while it has no target answers;
- Baneling bursts on contact with its target and when it dies (splash 2.2 round it, enemies
  only); Colossus Thermal Lances hit a 2.8 x 0.3 line across the attack direction (enemies only);
- randomness only where SC2 has it: spawn placement within a group and SC2's random weapon
  delay (-1..+2 loops per shot), seeded by (seed, episode) so episodes are reproducible.

Simplifications against SC2:
- no damage point / projectile travel: damage lands on the firing loop;
- a unit's decision (acquire, move, stop) is taken once per tick (8 loops with step_mul 8),
  and collisions are resolved at the end of each tick;
- local avoidance is a tangent rule round groups of units seen from the mover, not SC2's
  pathfinding (which plans round groups further ahead);
- the Colossus walks on the pathing grid dilated by one cell (it steps over 2-cell cliffs);
- enemy Medivacs heal the nearest damaged biological ally in sight, else follow their army
  (SMACv2's maps: else stay, as nothing orders them; docs/unit_data.md, "SMACv2").
"""
import functools
from dataclasses import dataclass

import numpy as np

from . import collisions, combat, orders, steering
from . import units as us
from .collisions import R_ANCHORED, R_FIXED, R_IDLE, R_MOVING
from .scenarios import Point, Scenario, get_scenario
from .teams import Team
from .unit_ids import STOCK_ID_OF_NAME

# Order kinds of BuiltinEngine.step (the engine contract): see orders.py.
ORDER_KEEP, ORDER_STOP, ORDER_MOVE, ORDER_ATTACK, ORDER_HEAL = orders.ORDER_KINDS


class GameRestarted(RuntimeError):
    """Raised by an engine's step() when the game process died and was relaunched.

    The episode in progress is lost; the game logic ends it as SMAC does, returning
    (0, True, {}), and the next reset() starts a fresh one. Part of the engine contract
    (here, in the game layer) so that the logic can catch it without importing the real-game engine.
    """


# Internal unit modes. _GUARD: an attack-moving enemy that reached its point (idle, but it
# still acquires targets automatically, as idle SC2 units do).
_IDLE, _MOVE, _ATTACK, _ATTACK_MOVE, _HEAL, _HUNT, _GUARD = 0, 1, 2, 3, 4, 5, 6

# Mode reached by each order kind (index = order kind; 0 = keep is never looked up).
_MODE_OF_ORDER = np.array([_IDLE, _IDLE, _MOVE, _ATTACK, _HEAL])
# Modes in which a unit without a target walks to its order point.
_WALKS = np.array([False, True, False, True, False, True, False])
# Modes in which an enemy acquires targets automatically (SC2 automatic targeting).
_ACQUIRES = np.array([False, False, False, True, False, False, True])

LOOPS_PER_TICK = 8
# Collision solver: overlaps (sum of radii minus centre distance) left after a tick stay below
# COLLISION_TOL world units; the solver gives up after COLLISION_MAX_ITERS sweeps (never reached
# in the measured battles, see tests/test_sim_mechanics.py).
COLLISION_TOL = 0.01
COLLISION_MAX_ITERS = 60
COLLISION_RULE_ITERS = 20  # sweeps under the pushing rules before everyone gives way
_SEP_MARGIN = 0.25      # pairs closer than this beyond contact are watched by the solver
_SEP_RELAX = 1.5        # over-relaxation of the solver's mean corrections
_SEP_ROUNDS = 8         # solves, each over the pairs then in or near contact
_STEER_ROUNDS = 2       # rounds in which the movers' steps are settled against one another
_SURROUND_LOOK = 2.5    # a melee chaser this close to its range looks for a free place round the target
_SLOTS = np.exp(2j * np.pi * np.arange(16) / 16)  # places round a target a melee unit considers
_BORDER = 4             # blocked cells around the padded grids (> one tick of movement)
_CHASE_SLACK = 0.02     # a chasing unit stops this far inside its range
_PLACE_MARGIN = 0.25    # gap between units placed at one spawn point
_EPS = collisions.EPS
# Target classes of automatic targeting: threat first, then Attack Target Priority (0..20).
_THREAT_CLASS = 100


@dataclass
class Units:
    """Struct of arrays, one row per unit: allies first (creation order), then enemies."""

    n_allies: int
    n_enemies: int
    unit_type: np.ndarray       # int64 [n]
    x: np.ndarray               # float64 [n]
    y: np.ndarray               # float64 [n]
    health: np.ndarray          # float64 [n]
    health_max: np.ndarray      # float64 [n]
    shield: np.ndarray          # float64 [n]
    shield_max: np.ndarray      # float64 [n]
    energy: np.ndarray          # float64 [n]
    weapon_cooldown: np.ndarray  # float64 [n], remaining game loops until the next shot
    alive: np.ndarray           # bool [n]


def _dilate(grid: np.ndarray) -> np.ndarray:
    """Cells within one cell (8-neighbourhood) of a True cell -> bool like grid."""
    padded = np.pad(grid, 1)
    out = np.zeros_like(grid)
    for dx in range(3):
        for dy in range(3):
            out |= padded[dx:dx + grid.shape[0], dy:dy + grid.shape[1]]
    return out


class _FlowFields:
    """Breadth-first distances to goal cells over a walkable grid, cached per goal.

    Steps go to the 8 neighbours of a cell. A diagonal step between two walkable cells always
    has room: where an orthogonal cell is blocked, its corner triangle between them is walkable
    (see _cell_parts)."""

    _NEIGHBOURS = ((1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (1, -1), (-1, 1), (-1, -1))

    def __init__(self, walkable: np.ndarray):
        self.walkable = walkable
        self._fields: dict[tuple[int, int], np.ndarray] = {}
        self._plans: dict[tuple[int, int], np.ndarray] = {}
        self._next_to = self._neighbour_table(walkable)
        self._cells = np.flatnonzero(walkable.ravel())    # [cells] flat indices of walkable cells
        self._region = self._label_regions()[self._cells]  # [cells] region of each

    @classmethod
    def _neighbour_table(cls, walkable: np.ndarray) -> np.ndarray:
        """Flat index of each cell's walkable neighbours, -1 where off the grid or blocked
        -> int [X * Y + 1, 8] (the last row, all -1, is where index -1 lands)."""
        nx, ny = walkable.shape
        xs, ys = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
        table = np.full((nx * ny + 1, len(cls._NEIGHBOURS)), -1, dtype=np.int64)
        for k, (dx, dy) in enumerate(cls._NEIGHBOURS):
            tx, ty = xs + dx, ys + dy
            ok = (tx >= 0) & (tx < nx) & (ty >= 0) & (ty < ny)
            ok[ok] = walkable[tx[ok], ty[ok]]
            table[:-1, k] = np.where(ok, tx * ny + ty, -1).ravel()
        return table

    def field(self, goal: tuple[int, int]) -> np.ndarray:
        """Steps from every cell to `goal` -> float [map_x, map_y] (inf on blocked cells).

        A goal a unit cannot reach (a Colossus standing over a cliff, a point in another
        region) is approached as SC2's pathing approaches an unreachable point: the unit goes
        to the reachable place nearest to it. So the field counts the steps to the cells of
        each walkable region nearest to the goal (_nearest_cells)."""
        if goal not in self._fields:
            dist = np.full(self.walkable.size, np.inf)
            unseen = np.ones(self.walkable.size + 1, dtype=bool)  # the last entry a sink
            for level, cells in enumerate(self._breadth_first(self._nearest_cells(goal), unseen)):
                dist[cells] = level
            self._fields[goal] = dist.reshape(self.walkable.shape)
        return self._fields[goal]

    def _breadth_first(self, start: np.ndarray, unseen: np.ndarray):
        """Breadth-first search from the flat cells `start`, one whole level of cells at a time:
        yields each level's cells; `unseen` (bool [X * Y + 1]) is cleared in place as cells are
        reached."""
        frontier = start
        while frontier.size:
            unseen[frontier] = False
            yield frontier
            reached = self._next_to[frontier].ravel()
            frontier = np.unique(reached[(reached >= 0) & unseen[reached]])

    def _nearest_cells(self, goal: tuple[int, int]) -> np.ndarray:
        """Flat indices of the cells a route to `goal` ends in: in each region of connected
        walkable cells, the cells nearest to the goal (centre to centre): the goal cell itself
        in its own region."""
        ny = self.walkable.shape[1]
        d2 = (self._cells // ny - goal[0]) ** 2 + (self._cells % ny - goal[1]) ** 2
        nearest = np.full(self.walkable.size, np.iinfo(np.int64).max)   # [X * Y] by region
        np.minimum.at(nearest, self._region, d2)
        return self._cells[d2 == nearest[self._region]]

    def _label_regions(self) -> np.ndarray:
        """Region of every cell: walkable cells connected by steps to 8 neighbours share the
        flat index of one of them; -1 where blocked -> int [X * Y]."""
        label = np.full(self.walkable.size, -1, dtype=np.int64)
        unseen = np.ones(self.walkable.size + 1, dtype=bool)  # the last entry a sink
        for start in self._cells:
            if unseen[start]:
                for cells in self._breadth_first(np.array([start]), unseen):
                    label[cells] = start
        return label

    def plan(self, goal: tuple[int, int]) -> np.ndarray:
        """Route to `goal`, cached -> aim [X, Y] complex: the point a unit in that cell heads
        for, the centre of the cell two steps further on the shortest path, or the centre of
        the cell it ends in when that is nearer; NaN where there is no step to take (the cells
        the route ends in, and cells it cannot reach): the unit goes straight for the goal."""
        if goal not in self._plans:
            dist = self.field(goal)
            nx, ny = self.walkable.shape
            nxt = self._next_cells(dist)                   # [X, Y] flat index of the next cell
            flat = np.arange(nx * ny).reshape(self.walkable.shape)
            one = np.where(nxt >= 0, nxt, flat)
            two = nxt.ravel()[one]                         # the next cell's next cell (-1 at the end)
            two = np.where(two >= 0, two, one)
            aim = (two // ny + 0.5) + 1j * (two % ny + 0.5)
            self._plans[goal] = np.where(nxt >= 0, aim, np.nan)
        return self._plans[goal]

    def _next_cells(self, dist: np.ndarray) -> np.ndarray:
        """Next cell on a shortest path from each cell: the first neighbour (in _NEIGHBOURS
        order) of the smallest distance, if that is below the cell's own (-1 where none: the
        goal, unreachable cells) -> flat indices, int [X, Y]."""
        table = self._next_to[:-1]                                         # [X * Y, 8]
        around = np.where(table >= 0, dist.ravel()[table], np.inf)         # [X * Y, 8]
        best = around.argmin(axis=1)
        rows = np.arange(table.shape[0])
        own = dist.ravel()
        closer = (around[rows, best] < own) & np.isfinite(own)
        return np.where(closer, table[rows, best], -1).reshape(dist.shape)


_WHOLE = collisions.WHOLE


def _cell_parts(grid: np.ndarray) -> np.ndarray:
    """Walkable parts of each cell of a pathing grid -> uint8 codes like grid.

    SC2's cliffs run along cell edges or at 45 degrees across cells; the 1-cell pathing grid
    draws a diagonal cliff as a staircase of blocked cells. A blocked cell whose two
    neighbours on either side of one corner are both walkable is taken to be cut by such a
    diagonal: its triangle at that corner is walkable. Codes: 15 a walkable cell; else bits
    1, 2, 4, 8 for the walkable triangle at the bottom-left (x + y <= 1 inside the cell),
    bottom-right (x >= y), top-left (y >= x) and top-right (x + y >= 1) corner. This keeps the
    corridor's 2x2 choke passable: it meets the open areas at cell corners only."""
    w = np.pad(grid, 1)
    left, right = w[:-2, 1:-1], w[2:, 1:-1]
    below, above = w[1:-1, :-2], w[1:-1, 2:]
    code = (1 * (left & below) | 2 * (right & below) | 4 * (left & above) | 8 * (right & above))
    return np.where(grid, _WHOLE, code).astype(np.uint8)


def _indices(mask: np.ndarray) -> np.ndarray:
    """Indices of the True entries of a 1-D mask: np.flatnonzero without its Python wrappers
    (they cost about a microsecond a call, a few percent of a tick on small maps)."""
    return mask.nonzero()[0]


@functools.cache
def _fractions(k: int) -> np.ndarray:
    """k evenly spaced fractions 0..1 (np.linspace, cached: lines are sampled every tick)."""
    out = np.linspace(0.0, 1.0, k)
    out.flags.writeable = False
    return out


def _fills_its_rows_and_columns(grid: np.ndarray) -> bool:
    """True when the walkable cells of every row and every column form one unbroken run and
    the runs widen then narrow (an octagon or rectangle): straight lines between walkable
    points then stay on walkable cells, up to the staircase of a diagonal edge."""
    for g in (grid, grid.T):
        widths = []
        for line in g:
            cells = np.flatnonzero(line)
            if cells.size and cells[-1] - cells[0] + 1 != cells.size:
                return False
            if cells.size:
                widths.append(cells.size)
        w = np.array(widths)
        peak = int(np.argmax(w)) if w.size else 0
        if (np.diff(w[:peak + 1]) < 0).any() or (np.diff(w[peak:]) > 0).any():
            return False
    return True


@functools.cache
def _hex_offsets(count: int, spacing: float) -> np.ndarray:
    """Hexagonal lattice offsets around 0, nearest first, at least `count` + margin -> complex [m]
    (cached, read-only: SMACv2's resets place dozens of groups)."""
    rings = int(np.ceil(np.sqrt(count))) + 3
    a, b = np.meshgrid(np.arange(-rings, rings + 1), np.arange(-rings, rings + 1), indexing="ij")
    pts = (a + 0.5 * b + 1j * (np.sqrt(3.0) / 2.0) * b).ravel() * spacing  # [m]
    out = pts[np.argsort(np.abs(pts), kind="stable")]
    out.flags.writeable = False
    return out


def _pair_table(stats: list[us.UnitStats], value, dtype: type) -> np.ndarray:
    """value(a, b) for every ordered pair of units, computed once per pair of unit types -> [n, n]."""
    kinds: dict[str, int] = {}
    kind_of = np.array([kinds.setdefault(s.name, len(kinds)) for s in stats])  # [n] type index
    distinct = {s.name: s for s in stats}.values()
    table = np.array([[value(a, b) for b in distinct] for a in distinct], dtype=dtype)  # [types, types]
    return table[kind_of[:, None], kind_of[None, :]]


class BuiltinEngine:
    """SC2 micro simulator behind the engine contract (see the spec's ENGINE CONTRACT).

    On SMAC's maps the armies are the map's (`reset()`); on SMACv2's generated maps they are
    the teams.Team given to every `reset(team)`, whose allies are the map's RL copies
    (`ally_unit_ids`: unit name -> raw type id) and enemies the stock units."""

    def __init__(self, map_name: str, seed: int | None, step_mul: int = 8):
        if not isinstance(step_mul, int) or step_mul < 1:
            raise ValueError(f"step_mul must be a positive int, got {step_mul!r}")
        self.scenario: Scenario = get_scenario(map_name)
        self.map_name = map_name
        self.step_mul = step_mul
        self.seed = seed
        if seed is not None and (not isinstance(seed, (int, np.integer)) or seed < 0):
            raise ValueError(f"seed must be a non-negative int or None, got {seed!r}")
        self._base_seed = int(np.random.SeedSequence().entropy) if seed is None else int(seed)
        self._episode = 0
        sc = self.scenario
        self.map_x, self.map_y = sc.map_x, sc.map_y
        self.max_distance_x, self.max_distance_y = float(sc.map_x), float(sc.map_y)
        self.pathing_grid = sc.pathing_grid
        self.terrain_height = sc.terrain_height
        self.ally_unit_ids: dict[str, int] = dict(us.GEN_ALLY_IDS) if sc.generated else {}
        # Ticks must divide the step and stay below every weapon period (at most one shot each).
        self._tick_loops = max(d for d in range(1, LOOPS_PER_TICK + 1) if step_mul % d == 0)
        self._build_terrain()
        self._types: tuple[int, ...] = ()
        self.n_allies = self.n_enemies = 0
        self.units: Units | None = None  # a generated map has no units before its first reset
        if not sc.generated:
            self._set_armies(sc.ally_types + sc.enemy_types, sc.n_allies, sc.ally_spawns + sc.enemy_spawns)
        self.last_attacks: list[tuple[int, int]] = []

    def _set_armies(self, types: tuple[int, ...], n_allies: int, spawns: tuple[Point, ...]) -> None:
        """The armies to create at reset: raw type ids (allies first) and their spawn points. The
        tables of the units are rebuilt when the composition changes."""
        self._spawns = spawns
        if types == self._types and n_allies == self.n_allies:
            return
        self._types = types
        self.n_allies, self.n_enemies = n_allies, len(types) - n_allies
        self._build_static(list(types))
        self._build_state()

    # ------------------------------------------------------------------ static tables
    def _build_static(self, types: list[int]) -> None:
        stats = [us.get_unit_stats(t) for t in types]
        self.n = len(stats)
        self._stats = stats
        self._idx = np.arange(self.n)
        self._is_enemy = self._idx >= self.n_allies
        self._build_unit_columns(stats)
        self._build_pair_tables(stats)
        self._build_enemy_tables(stats)

    def _build_unit_columns(self, stats: list[us.UnitStats]) -> None:
        """Per-unit constants -> arrays [n]."""
        def column(field, dtype=np.float64) -> np.ndarray:
            return np.array([field(s) for s in stats], dtype=dtype)

        self._speed = column(lambda s: s.speed)
        self._radius = column(lambda s: s.radius)
        self._armor = column(lambda s: s.armor)
        self._period = column(lambda s: s.cooldown)
        self._range = column(lambda s: us.HEAL_RANGE if s.heals else s.range)
        self._scan = column(lambda s: s.scan_range)
        self._regen = column(lambda s: s.regen)
        self._hits = column(lambda s: s.hits, np.int64)
        self._splash = column(lambda s: s.splash, np.int64)
        self._is_air = column(lambda s: s.is_air, bool)
        self._heals = column(lambda s: s.heals, bool)
        self._cliff = column(lambda s: s.crosses_cliffs, bool)
        self._melee = column(lambda s: s.has_weapon and s.range < 1.0, bool)
        self._bio_ground = column(lambda s: bool(s.attributes & us.BIOLOGICAL) and not s.is_air, bool)
        self._healers = np.flatnonzero(self._heals)
        self._any_shield = any(s.shield > 0 for s in stats)
        self._any_regen = bool((self._regen > 0).any())
        self._tick_speed = self._speed * self._tick_loops
        self._tick_speed_max = self._tick_speed.max()
        self._inv_speed = np.divide(1.0, self._speed, out=np.zeros(self.n), where=self._speed > 0)
        self._grid_of = np.where(self._is_air, 2, self._cliff.astype(np.int64))  # see _build_terrain

    def _build_pair_tables(self, stats: list[us.UnitStats]) -> None:
        """Pairwise constants -> arrays [n, n] indexed [unit i, unit j]."""
        same_side = self._is_enemy[:, None] == self._is_enemy[None, :]
        self._raw = _pair_table(stats, us.damage_per_hit, np.float64)
        self._can_attack = ~same_side & _pair_table(stats, lambda a, t: a.has_weapon and us.can_hit(a, t), bool)
        self._reach = self._range[:, None] + self._radius[:, None] + self._radius[None, :]
        # Collision distance: only between units of one collision layer, never a unit with itself.
        layer = np.array([s.collide for s in stats])
        self._layer = layer
        rsum = self._radius[:, None] + self._radius[None, :]
        collides = (layer[:, None] == layer[None, :]) & (layer[:, None] != us.COLLIDE_NONE)
        rsum[~collides] = -np.inf
        np.fill_diagonal(rsum, -np.inf)
        self._rsum = rsum
        self._mass = self._radius ** 2
        # Tiny antisymmetric offset: two units on the same point still push apart.
        self._tie = 1e-6 * np.sign(self._idx[:, None] - self._idx[None, :]).astype(np.complex128)
        # The pairs that can collide, each once (i < j, row-major as np.nonzero lists them): the
        # solver measures gaps on these [P] instead of on the whole [n, n] matrix.
        # (np.nonzero's index arrays are strided views, contiguous or not by their length: made contiguous, so
        # that the collision loop has one compiled layout)
        self._pair_a, self._pair_b = map(np.ascontiguousarray, np.nonzero(np.triu(np.isfinite(rsum), 1)))
        self._pair_tie = self._tie[self._pair_a, self._pair_b]

    def _build_enemy_tables(self, stats: list[us.UnitStats]) -> None:
        """Constants of the enemy AI; [enemies, allies] tables."""
        na = self.n_allies
        order = self.scenario.enemy_order
        ea_attack = self._can_attack[na:, :na]
        self._hunt_allowed = np.ones(na, dtype=bool)
        self._hunts = order.kind in ("attack_units", "attack_nearest")  # the orders that put enemies in _HUNT
        if order.kind == "attack_units":
            self._hunt_allowed[:] = False
            self._hunt_allowed[list(order.targets)] = True
        # SMACv2's trigger: attack orders every _trigger_period loops (0: none), to enemies without one.
        self._trigger_period = order.period if order.kind == "attack_nearest" else 0
        # The [enemies, allies] tables contiguous (a slice, a transpose's product): the compiled targeting loops
        # are specialised on memory layout, which for these views would depend on the number of units.
        self._ea_attack = np.ascontiguousarray(ea_attack)
        self._ea_edge = self._radius[na:, None] + self._radius[None, :na]
        # Automatic targeting classes [L "Automatic Targeting"]: an ally is a threat to enemy e
        # when its weapon can hit e or it always threatens (Medivac); then its ATP.
        threat = self._can_attack[:na, na:].T | np.array([s.always_threatens for s in stats[:na]])[None, :]
        priority = np.array([s.priority for s in stats[:na]], dtype=np.float64)
        self._ea_class = np.ascontiguousarray(_THREAT_CLASS * threat + priority[None, :])  # [enemies, allies]
        self._enemy_armed = np.array([s.has_weapon for s in stats[na:]], dtype=bool)
        self._enemy_healers = self._healers[self._healers >= na]
        self._e_rows = np.arange(self.n_enemies)
        self._e_range = self._range[na:]
        self._e_scan = self._scan[na:]

    def _build_terrain(self) -> None:
        """Walkable grids: 0 ground, 1 cliff-walkers (Colossus), 2 air (the whole map)."""
        grid = np.asarray(self.pathing_grid, dtype=bool)
        grids = (grid, _dilate(grid), np.ones_like(grid))
        # Walkable parts of each cell: bit 1, 2, 4, 8 = the triangle at its bottom-left,
        # bottom-right, top-left, top-right corner; 15 = the whole cell (see _cell_parts).
        # Square (the shorter side padded further with blocked cells): one bound for x and y.
        side = max(grid.shape) + 2 * _BORDER
        self._padded = np.stack([np.pad(_cell_parts(g), ((_BORDER, side - _BORDER - g.shape[0]),
                                                         (_BORDER, side - _BORDER - g.shape[1])))
                                 for g in grids])                      # [3, side, side]
        self._flows = tuple(_FlowFields(g) for g in grids)
        # Only a walkable area with notches (corridor's choke, 2c_vs_64zg's cliff, ...) can put
        # terrain between a unit and its destination; a rectangle or octagon-like arena cannot.
        self._needs_routing = not all(_fills_its_rows_and_columns(g) for g in grids)

    def _build_state(self) -> None:
        n = self.n
        self._z = np.zeros(n, dtype=np.complex128)
        hp_max = np.array([s.health for s in self._stats], dtype=np.float64)
        sh_max = np.array([s.shield for s in self._stats], dtype=np.float64)
        self.units = Units(
            n_allies=self.n_allies, n_enemies=self.n_enemies,
            unit_type=np.array(self._types, dtype=np.int64),
            x=self._z.real, y=self._z.imag,
            health=hp_max.copy(), health_max=hp_max, shield=sh_max.copy(), shield_max=sh_max,
            energy=np.zeros(n), weapon_cooldown=np.zeros(n), alive=np.ones(n, dtype=bool))
        self._energy0 = np.array([s.energy for s in self._stats], dtype=np.float64)
        self._energy_max = np.array([s.energy_max for s in self._stats], dtype=np.float64)
        self._mode = np.zeros(n, dtype=np.int64)
        self._point = np.zeros(n, dtype=np.complex128)
        self._target = np.full(n, -1, dtype=np.int64)
        self._last_damage = np.full(n, -np.inf)
        self._rsum_live = self._rsum.copy()
        self._pair_rsum_live = self._rsum[self._pair_a, self._pair_b]  # [P], -inf once one is dead
        self._mobile = self._speed > 0
        self._side = np.zeros(n)  # side (+1 left, -1 right) a blocked mover last turned to
        self._last_step = np.zeros(n)  # distance each unit moved in the last tick
        self._blocked = np.zeros(n, dtype=bool)  # whether the terrain blocked its step this tick
        self._loop = 0
        self._deaths = False
        self._rng = np.random.default_rng([self._base_seed, 0, 1])
        u = self.units
        self._army = combat.Army(
            z=self._z, alive=u.alive, health=u.health, shield=u.shield, last_damage=self._last_damage,
            mobile=self._mobile, target=self._target, mode=self._mode, rsum=self._rsum_live,
            pair_a=self._pair_a, pair_b=self._pair_b, pair_rsum=self._pair_rsum_live,
            radius=self._radius, armor=self._armor, raw=self._raw, can_attack=self._can_attack,
            hits=self._hits, splash=self._splash, acquires=_ACQUIRES, idle=_IDLE, n_allies=self.n_allies)

    # ------------------------------------------------------------------ reset
    def reset(self, team: Team | None = None) -> Units:
        """Respawn both armies: the map's on a SMAC map (no team), `team`'s on a SMACv2 map;
        placement depends only on (seed, episode number, team)."""
        self._take_team(team)
        episode, self._episode = self._episode, self._episode + 1
        spawn_rng = np.random.default_rng([self._base_seed, episode, 0])
        self._rng = np.random.default_rng([self._base_seed, episode, 1])  # weapon delays, ties
        u = self.units
        u.health[:] = u.health_max
        u.shield[:] = u.shield_max
        u.energy[:] = self._energy0
        u.weapon_cooldown[:] = 0.0
        u.alive[:] = True
        self._mobile[:] = self._speed > 0
        self._side[:] = 0.0
        self._last_step[:] = self._tick_speed  # as if all were walking at full speed
        self._rsum_live[:] = self._rsum  # (in place: self._army holds these arrays)
        self._pair_rsum_live[:] = self._rsum[self._pair_a, self._pair_b]
        self._last_damage[:] = -np.inf
        self._loop = 0
        self._deaths = False
        self._place(spawn_rng)
        self._target[:] = -1
        na = self.n_allies
        self._mode[:na] = _IDLE
        self._point[:na] = self._z[:na]
        self._give_enemy_orders(spawn_rng)
        self.last_attacks = []
        return u

    def _take_team(self, team: Team | None) -> None:
        """The armies of a SMACv2 map's episode: allies (the map's RL copies) in the team's order,
        then enemies (stock units), each created at its point."""
        if not self.scenario.generated:
            if team is not None:
                raise ValueError(f"map {self.map_name} has its own armies: reset() takes no team")
            return
        if not isinstance(team, Team):
            raise ValueError(f"map {self.map_name} creates the armies of a teams.Team: call reset(team), got {team!r}")
        if not team.ally_units or not team.enemy_units:
            raise ValueError(f"a team on {self.map_name} needs at least one unit per side, got "
                             f"{len(team.ally_units)} allies and {len(team.enemy_units)} enemies")
        points = tuple((float(x), float(y)) for x, y in team.ally_xy + team.enemy_xy)
        off = [p for p in points if not (0.0 <= p[0] <= self.map_x and 0.0 <= p[1] <= self.map_y)]
        if off:
            raise ValueError(f"team position {off[0]} is off the map: positions lie in [0, {self.map_x}] x "
                             f"[0, {self.map_y}]")
        types = (tuple(self.ally_unit_ids[name] for name in team.ally_units)
                 + tuple(STOCK_ID_OF_NAME[name] for name in team.enemy_units))
        self._set_armies(types, len(team.ally_units), points)

    def _place(self, rng: np.random.Generator) -> None:
        """Units sharing a spawn point: the first on it, the others on a jittered hexagonal
        lattice around it (nearest free walkable sites first, order shuffled a little)."""
        spawns = self._spawns
        placed = np.zeros(self.n, dtype=bool)
        groups: dict[tuple[int, tuple[float, float]], list[int]] = {}
        for i, p in enumerate(spawns):
            groups.setdefault((int(self._is_enemy[i]), p), []).append(i)
        for (_, point), members in groups.items():
            spacing = 2.0 * self._radius[members].max() + _PLACE_MARGIN
            offsets = _hex_offsets(len(members), spacing)
            key = np.abs(offsets) + rng.uniform(0.0, 0.5 * spacing, offsets.size)
            key[0] = -1.0  # the first unit stands on the point itself
            jitter = rng.uniform(-1, 1, offsets.size) + 1j * rng.uniform(-1, 1, offsets.size)
            jitter *= 0.1 * _PLACE_MARGIN  # keeps neighbours apart: spacing has the full margin
            jitter[0] = 0.0
            candidates = complex(*point) + (offsets + jitter)[np.argsort(key, kind="stable")]
            self._place_group(members, candidates, placed)

    def _place_group(self, members: list[int], candidates: np.ndarray, placed: np.ndarray) -> None:
        z = self._z
        start = 0
        for i in members:
            for c in range(start, candidates.size):
                p = candidates[c]
                if not self._walkable_point(i, p):
                    continue
                others = placed & np.isfinite(self._rsum[i])
                if np.any(np.abs(z[others] - p) < self._rsum[i, others]):
                    continue
                z[i] = p
                placed[i] = True
                start = c + 1
                break
            else:
                raise RuntimeError(f"no free spawn position for unit {i} on map {self.map_name}")

    def _walkable_point(self, i: int, p: complex) -> bool:
        if not (0.0 <= p.real < self.map_x and 0.0 <= p.imag < self.map_y):
            return False
        return bool(self._walkable_on(self._grid_of[i], np.array([p]))[0])

    def _give_enemy_orders(self, rng: np.random.Generator) -> None:
        order = self.scenario.enemy_order
        e = slice(self.n_allies, None)
        if order.kind == "attack_move":
            self._mode[e], self._point[e] = _ATTACK_MOVE, complex(*order.points[0])
        elif order.kind == "attack_move_random_between":
            a, b = complex(*order.points[0]), complex(*order.points[1])
            self._mode[e], self._point[e] = _ATTACK_MOVE, a + rng.uniform() * (b - a)
        elif order.kind == "attack_units":
            self._mode[e] = _HUNT
            self._point[e] = self._z[e]
        elif order.kind == "attack_nearest":  # created without an order: idle until the trigger's
            self._mode[e] = _GUARD
            self._point[e] = self._z[e]
        elif order.kind == "none":
            self._mode[e] = _ATTACK_MOVE
            self._point[e] = self._z[e]
        else:
            raise ValueError(f"unknown enemy order kind {order.kind!r} in scenario {self.map_name}")

    # ------------------------------------------------------------------ step
    def step(self, kind: np.ndarray, tx: np.ndarray, ty: np.ndarray, target: np.ndarray) -> Units:
        """Issue one order per ally (engine ally order), then advance step_mul game loops."""
        self._issue(self._order_column(kind, np.int64, "kind"), self._order_column(tx, np.float64, "tx"),
                    self._order_column(ty, np.float64, "ty"), self._order_column(target, np.int64, "target"))
        self.last_attacks = []
        for _ in range(self.step_mul // self._tick_loops):
            self._tick(self._tick_loops)
        return self.units

    def _order_column(self, values, dtype, name: str) -> np.ndarray:
        """One field of the allies' orders as a contiguous [allies] array, whatever the caller passed (the
        env's target points are rows of a Fortran-ordered [2, allies] array, strided views): the compiled loops are specialised on memory layout, and a second
        layout would compile them all again (about 10 s). The shape is checked as passed, so that a scalar is
        refused even when there is one ally."""
        column = np.asarray(values, dtype=dtype)
        if column.shape != (self.n_allies,):
            raise ValueError(f"step expects one order per ally ({self.n_allies}), got {name} of shape {column.shape}")
        return np.ascontiguousarray(column)

    def _issue(self, kind: np.ndarray, tx: np.ndarray, ty: np.ndarray, target: np.ndarray) -> None:
        wrong = orders.issue(kind, tx, ty, target, self.n, self.units.alive, _MODE_OF_ORDER,
                             self._mode, self._point, self._z, self._target)
        if wrong == orders.BAD_KIND:
            raise ValueError(f"order kinds must be 0..4 (keep, stop, move, attack, heal), got {kind}")
        if wrong == orders.BAD_TARGET:
            raise ValueError(f"attack/heal targets must be unit indices 0..{self.n - 1}, got {target}")

    # ------------------------------------------------------------------ one tick
    def _tick(self, k: int) -> None:
        if self._deaths:
            self._forget_dead()
        z = self._z
        dist = np.abs(z[:, None] - z[None, :])  # [n, n] centre distances
        self._enemy_ai(dist)
        tgt = self._target
        has_t = tgt >= 0
        reach = self._reach[self._idx, tgt]
        in_range = has_t & (dist[self._idx, tgt] <= reach)
        # Movement: chase the target up to range, or walk to the order point.
        movers = self._mobile & ~in_range & (has_t | _WALKS[self._mode])
        # Pushing ranks of this tick: units in range of their target stand attacking (or healing).
        rank = np.where(in_range, R_ANCHORED, np.where(movers, R_MOVING, R_IDLE))
        rank[~self._mobile] = R_FIXED
        start = np.where(in_range, 0.0, np.inf)  # loop offset at which each unit is in range
        if movers.any():
            np.minimum(start, self._move(movers, has_t, reach, rank, dist), out=start)
        else:
            self._last_step[:] = 0.0
        self._shoot(start, k)
        if self._healers.size:
            self._heal(in_range, k)
        self._separate(rank)
        self._regenerate(k)
        self._loop += k

    def _move(self, movers: np.ndarray, has_t: np.ndarray, reach: np.ndarray,
              rank: np.ndarray, dist: np.ndarray) -> np.ndarray:
        """Move the movers for one tick; return the loop offset at which each chaser gets in range
        (inf for the others)."""
        z = self._z
        dest, d, remaining, length, heading, going, close = steering.chase(
            z, self._target, self._point, has_t, movers, reach, self._tick_speed, self._melee,
            _CHASE_SLACK, _SURROUND_LOOK, _EPS)
        if close.size:
            self._surround(close, heading, length, reach, dist)
        # Terrain: a mover whose straight line to its destination crosses a blocked cell heads
        # along the shortest path on the cell grid instead (flow field of the destination cell).
        g = _indices(going)
        if g.size and self._needs_routing:
            routed = g[self._line_blocked(g, dest[g])]
            if routed.size:
                self._route_headings(routed, dest[routed], heading)
        goal = z + heading * np.maximum(d, length)
        self._steer(going, heading, length, rank, dist, goal)
        # Step; where the terrain blocks it, slide along the wall (keep the walkable axis, else stay).
        blocked = self._blocked
        collisions.advance(self._padded, _BORDER, self._grid_of, z, going, heading, length, blocked,
                           self._last_step)
        # A unit that reached its move point stops there (it does not walk back when pushed);
        # an attack-moving enemy that reached its point stays and keeps acquiring (SC2 idle).
        reached = going & (remaining <= self._tick_speed) & ~has_t
        self._mode[reached & (self._mode == _MOVE)] = _IDLE
        self._mode[reached & (self._mode == _ATTACK_MOVE)] = _GUARD
        return steering.arrivals(z, self._target, movers, has_t, remaining, self._tick_speed, blocked,
                                 self._inv_speed, reach)

    def _surround(self, close: np.ndarray, heading: np.ndarray, length: np.ndarray,
                  reach: np.ndarray, dist: np.ndarray) -> None:
        """Melee units closing on a target whose near side is taken head for the nearest free
        place round it (how melee units surround in SC2) instead of queueing behind.

        close: melee chasers within _SURROUND_LOOK of their range; heading and length are
        changed in place for those whose direct approach is blocked. dist: centre distances
        [n, n] (units have not moved since)."""
        steering.surround(close, self._z, self._target, reach - _CHASE_SLACK, _SLOTS, self._rsum_live,
                          dist, self._padded, _BORDER, self._grid_of, heading, length,
                          self._tick_speed, COLLISION_TOL, _EPS)

    def _line_blocked(self, g: np.ndarray, dest: np.ndarray) -> np.ndarray:
        """Whether the straight line from each unit g to dest crosses a cell its grid blocks
        (sampled every half cell) -> bool [len(g)]."""
        k = int(np.ceil(2.0 * np.abs(dest - self._z[g]).max())) + 1
        return collisions.lines_blocked(self._padded, _BORDER, self._grid_of, self._z, g, dest,
                                        _fractions(k))

    def _route_headings(self, units: np.ndarray, dest: np.ndarray, heading: np.ndarray) -> None:
        """Headings (in place) of units whose straight line to `dest` is blocked by terrain: along
        the shortest path on the cell grid, towards the aim point of their cell (one flow field
        per destination cell and grid, cached)."""
        z = self._z[units]
        cx = z.real.astype(np.int64)
        cy = z.imag.astype(np.int64)
        gx = np.minimum(np.maximum(dest.real.astype(np.int64), 0), self.map_x - 1)
        gy = np.minimum(np.maximum(dest.imag.astype(np.int64), 0), self.map_y - 1)
        grid = self._grid_of[units]
        groups: dict[int, list[int]] = {}  # rows of `units` by (grid, goal cell)
        for row, key in enumerate(((grid * self.map_x + gx) * self.map_y + gy).tolist()):
            groups.setdefault(key, []).append(row)
        aim = np.empty(units.size, dtype=np.complex128)
        for rows in groups.values():
            first = rows[0]
            plan = self._flows[int(grid[first])].plan((int(gx[first]), int(gy[first])))
            aim[rows] = plan[cx[rows], cy[rows]]
        towards = aim - z
        d = np.abs(towards)
        ok = d > _EPS  # (False for NaN: no step to take, straight on)
        heading[units[ok]] = towards[ok] / d[ok]

    def _steer(self, movers: np.ndarray, heading: np.ndarray, length: np.ndarray,
               rank: np.ndarray, dist: np.ndarray, goal: np.ndarray) -> None:
        """Local avoidance: the movers' headings and step lengths for this tick.

        A mover whose step would run into a unit it cannot push (an enemy, or a friend standing
        to attack), or into a mover coming the other way or one much slower than itself, walks
        round the group that unit is part of (steering._round_groups: with the units near it that stand
        in the mover's way, too close together to pass between), along the tangent to the
        group on the side of the shorter way to its goal. Where the group closes round the
        mover on both sides, it walks along the tangent to that unit's contact circle, on one
        side, which it keeps (round the next unit too) until its way is clear again. No mover
        then walks into such a unit, nor into the place another mover is about to take: touching and
        closing, it slides along the contact; otherwise its step ends at the first contact
        during the tick, both moving at their planned velocities (the movers' steps are settled
        together in _STEER_ROUNDS rounds; steps only ever shorten). Idle friends, and friends
        moving its way at at least half its speed, are not in the way: it pushes them (SC2's
        pushing rules: idle friends give way, moving friends push one another; the collision
        solver _separate shares those pushes by mass).

        heading: unit vectors [n], length: step lengths [n]; both changed in place.
        dist: centre distances at the start of the tick [n, n]. goal: the point each mover is
        making for [n] (its destination, or the place or path point it heads to)."""
        m = _indices(movers)
        if m.size:
            steering.steer(m, self._z, heading, length, rank, dist, goal, self._rsum_live,
                           self._tick_speed_max, self._is_enemy, self._last_step, self._target,
                           self._side, self.units.alive, self._layer, self._radius, _STEER_ROUNDS,
                           COLLISION_TOL, _EPS)

    def _walkable(self, p: np.ndarray) -> np.ndarray:
        """Whether each unit could stand at p (its own grid; air anywhere on the map) -> bool [n]."""
        return self._walkable_on(self._grid_of, p)

    def _walkable_on(self, grid: np.ndarray, p: np.ndarray) -> np.ndarray:
        """Whether points p lie on walkable ground of grid `grid` (0 ground, 1 cliff-walkers,
        2 air; broadcast against p) -> bool like p.

        The grids carry a border of blocked cells wide enough for one tick of movement, so
        positions just outside the map need no clipping (far outside: the border)."""
        if grid.shape != p.shape:  # (a copy: a broadcast view is read-only, which the compiled loop would
            grid = np.broadcast_to(grid, p.shape).copy()  # take as a second type to compile for)
        ok = collisions.walkable_points(self._padded, _BORDER, grid.ravel(), p.ravel())
        return ok.reshape(p.shape)

    def _shoot(self, start: np.ndarray, k: int) -> None:
        """Fire every weapon that is ready within this tick, in loop order.

        start: loop offset at which each unit is in range of its target (inf if never)."""
        cd = self.units.weapon_cooldown
        tgt = self._target
        offset = np.maximum(np.ceil(cd), start)
        fire = (offset < k) & self._can_attack[self._idx, tgt]
        np.maximum(cd - k, 0.0, out=cd)
        if not fire.any():
            return
        shooters = _indices(fire)
        order = shooters[np.lexsort((shooters, offset[shooters]))]
        delays = self._rng.uniform(*us.WEAPON_RANDOM_DELAY_LOOPS, size=order.size)
        attacks, deaths = combat.fire(self._army, order, delays, offset, cd, self._period, k, self._loop)
        self.last_attacks += attacks
        self._deaths |= deaths

    def _heal(self, in_range: np.ndarray, k: int) -> None:
        """Medivacs on a heal order, in range of a biological ground unit: 9 HP/game-s for energy."""
        u = self.units
        for i in self._healers:
            t = int(self._target[i])
            if not (u.alive[i] and in_range[i] and self._mode[i] == _HEAL and self._bio_ground[t]):
                continue
            missing = u.health_max[t] - u.health[t]
            amount = min(us.HEAL_PER_LOOP * k, missing, u.energy[i] / us.HEAL_ENERGY_PER_HP)
            if amount > 0 and u.alive[t]:
                u.health[t] += amount
                u.energy[i] -= amount * us.HEAL_ENERGY_PER_HP

    def _separate(self, rank: np.ndarray) -> None:
        """Resolve the overlaps left by this tick's movement (collision solver).

        Pairs of one collision layer closer than their radius sum are pushed apart along the
        line between their centres, sweep after sweep, until no overlap exceeds COLLISION_TOL.
        Who gives way follows SC2's pushing rules through `rank` (idle < moving < standing to
        attack < immobile): the lower rank takes the whole correction, equal ranks share it by
        mass (radius squared), and an idle unit counts as standing against enemies (units cannot
        push enemy units). A sweep moves each unit by the mean of its pairs' corrections
        (over-relaxed), the usual stable form of this iteration. A unit that a push would put on
        an unpathable cell slides along the wall or, failing that, stays put and counts as
        immobile for the rest of the solve. When the rules cannot be met (a unit squeezed
        between units it must yield to, or pushed into pairs not watched yet), every unit
        shares by mass: after COLLISION_RULE_ITERS sweeps, and in every later round."""
        # Only a unit that moved this tick can have run into another (the last solve left none).
        moved = self._last_step > 0.0
        if moved.any():
            collisions.separate(self._z, moved, self._pair_a, self._pair_b, self._pair_tie,
                                self._pair_rsum_live, self._mass, self._is_enemy, rank, self._grid_of,
                                self._padded, _BORDER, COLLISION_TOL, _EPS, _SEP_RELAX,
                                COLLISION_MAX_ITERS, COLLISION_RULE_ITERS, _SEP_ROUNDS, _SEP_MARGIN)

    def _regenerate(self, k: int) -> None:
        """Shields (after the delay without damage), Zerg health and Medivac energy."""
        u = self.units
        if self._any_shield:
            quiet = self._loop - self._last_damage >= us.SHIELD_REGEN_DELAY_LOOPS
            gain = np.where(u.alive & quiet, us.SHIELD_REGEN_PER_LOOP * k, 0.0)
            np.minimum(u.shield + gain, u.shield_max, out=u.shield)
        if self._any_regen:
            np.minimum(u.health + np.where(u.alive, self._regen * k, 0.0), u.health_max, out=u.health)
        if self._healers.size:
            e = self._healers
            u.energy[e] = np.minimum(u.energy[e] + us.ENERGY_REGEN_PER_LOOP * k, self._energy_max[e])

    # ------------------------------------------------------------------ targets and enemy AI
    def _forget_dead(self) -> None:
        """Drop targets that died; allies whose attack/heal target died go idle."""
        self._deaths = False
        alive = self.units.alive
        tgt = self._target
        lost = (tgt >= 0) & ~alive[tgt]
        if not lost.any():
            return
        tgt[lost] = -1
        na = self.n_allies
        self._mode[:na][lost[:na] & ((self._mode[:na] == _ATTACK) | (self._mode[:na] == _HEAL))] = _IDLE
        if self._trigger_period:  # an attack order on a unit ends with it: the enemy is idle
            self._mode[na:][lost[na:] & (self._mode[na:] == _HUNT)] = _GUARD

    def _enemy_ai(self, dist: np.ndarray) -> None:
        """Targets of the computer player's units (facts §12; Liquipedia "Automatic Targeting").

        Attack-moving (and idle) enemies acquire automatically: among the allies their weapon can
        hit within its scan range they take the best class (a threat before a non-threat, then
        the highest Attack Target Priority) and, within it, the nearest (edge to edge). A target
        is kept while it is alive and in weapon range, unless a better-class ally enters the
        weapon range. When it leaves the weapon range the unit acquires again within its scan
        range (often the same unit); if nothing is there it keeps chasing. Units ordered to
        attack given units (2c_vs_64zg) go for the nearest of them, anywhere on the map; on
        SMACv2's maps the trigger orders each idle enemy without a target to attack the nearest
        ally (_hunt)."""
        na = self.n_allies
        if self._enemy_healers.size:
            self._medivac_ai(dist)
        if self._hunts:
            self._hunt(dist)
        alive = self.units.alive
        auto = alive[na:] & self._enemy_armed & _ACQUIRES[self._mode[na:]]
        if auto.any():
            orders.acquire(dist, na, alive, self._target, auto, self._ea_attack, self._ea_class,
                           self._ea_edge, self._e_range, self._e_scan)

    def _hunt(self, dist: np.ndarray) -> None:
        """Attack orders on the nearest ally (centre to centre) among those allowed.

        2c_vs_64zg (an order on a group of allies): an enemy whose target is gone takes the
        nearest of the group at once. SMACv2 (its map's trigger, when it runs in this tick): every
        idle enemy without a target (no order) is ordered to attack the nearest ally; an order
        its weapon cannot carry out (a ground weapon on an air unit, no weapon) fails in SC2 and
        leaves it idle: it acquires targets automatically meanwhile (_enemy_ai)."""
        na = self.n_allies
        alive = self.units.alive
        tgt = self._target[na:]
        mode = self._mode[na:]
        if self._trigger_period:
            if not self._trigger_runs():
                return
            hunt = alive[na:] & (mode == _GUARD) & (tgt < 0)
        else:
            hunt = alive[na:] & (mode == _HUNT) & ((tgt < 0) | ~alive[np.maximum(tgt, 0)])
        if hunt.any():
            cand = np.where(self._hunt_allowed & alive[:na], dist[na:, :na], np.inf)
            best = cand.argmin(axis=1)
            found = cand[self._e_rows, best] < np.inf
            if self._trigger_period:
                hunt &= found & self._ea_attack[self._e_rows, best]  # the others' orders fail
                mode[hunt] = _HUNT
            tgt[hunt] = np.where(found, best, -1)[hunt]

    def _trigger_runs(self) -> bool:
        """Whether SMACv2's periodic trigger runs in this tick: at loops 0, period, 2 period, ...
        of the episode (the first when the armies are created)."""
        period = self._trigger_period
        return -(-self._loop // period) * period < self._loop + self._tick_loops

    def _medivac_ai(self, dist: np.ndarray) -> None:
        """Enemy Medivacs: heal the nearest damaged biological ally in sight, else follow the army
        (SMAC's attack-moving armies), or stay where they are (SMACv2: the trigger's attack order
        fails on a Medivac, which has no attack ability, so it is idle)."""
        u = self.units
        for m in self._enemy_healers:
            if not u.alive[m]:
                continue
            t = self._target[m]
            if t >= 0 and u.alive[t] and u.health[t] < u.health_max[t]:
                continue
            friends = self._is_enemy & u.alive & self._bio_ground
            hurt = friends & (u.health < u.health_max) & (dist[m] <= self._stats[m].sight)
            if hurt.any():
                cand = np.flatnonzero(hurt)
                self._target[m] = cand[np.argmin(dist[m, cand])]
                self._mode[m] = _HEAL
            elif self._trigger_period:
                self._target[m] = -1
                self._mode[m] = _IDLE
            else:
                self._target[m] = -1
                self._mode[m] = _MOVE
                self._point[m] = self._z[friends].mean() if friends.any() else self._z[m]

    # ------------------------------------------------------------------ debug commands
    def kill_units(self, indices: list[int]) -> None:
        """Remove units at once, like SC2's DebugKillUnit (no Baneling burst); for tests."""
        for t in indices:
            combat.remove(self._army, int(t))
        self._deaths = True

    def move_unit(self, index: int, x: float, y: float) -> None:
        """Put a unit at (x, y), which must be walkable for it; for tests and scripted set-ups."""
        p = complex(x, y)
        if not self._walkable_point(int(index), p):
            raise ValueError(f"({x}, {y}) is not walkable for unit {index} on map {self.map_name}")
        self._z[int(index)] = p
        if index < self.n_allies:
            self._point[int(index)] = p

    def close(self) -> None:
        """Nothing to release: the engine holds only NumPy arrays."""
        self.last_attacks = []
