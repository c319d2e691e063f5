"""Built-in combat engine: a NumPy simulation of SC2 micro on the SMAC maps (facts §9–§12).

The engine advances the game in ticks of `LOOPS_PER_TICK` game loops (a divisor of step_mul).
Within a tick every unit decides once (target, movement), but shots are timed to the exact
game loop: a unit whose weapon comes off cooldown (or which arrives in range) at loop offset t of
the tick fires at t, and all shots of a tick are resolved in time order, so a unit killed at
loop t does not fire later in that tick. Everything else works on whole arrays of units.

Randomness (seeded by (seed, episode), so episodes are reproducible): spawn placement, SC2's
random weapon delay (-1..+2 loops per shot) and the enemy's choice between nearly equidistant
targets (ACQUIRE_TIE).

Simplifications against SC2 (kept deliberately small):
- no damage point / projectile travel: damage lands on the firing loop;
- a unit's decision (acquire, move, stop) is taken once per tick (8 loops with step_mul 8);
- collision: a few relaxation passes of pairwise separation between ground units;
- pathing: straight lines, and a breadth-first flow field over the 32×32 cell grid when the
  straight step would enter a blocked cell; a unit's centre never leaves pathable cells;
- the Colossus walks on the pathing grid dilated by one cell (it steps over 2-cell cliffs);
- enemy Medivacs heal the nearest damaged biological ally in sight, else follow their army.
"""
from collections import deque
from dataclasses import dataclass

import numpy as np

from envs.starcraft import units as us
from envs.starcraft.scenarios import Scenario, get_scenario

# Order kinds of BuiltinEngine.step (the engine contract).
ORDER_KEEP, ORDER_STOP, ORDER_MOVE, ORDER_ATTACK, ORDER_HEAL = 0, 1, 2, 3, 4

# Internal unit modes.
_IDLE, _MOVE, _ATTACK, _ATTACK_MOVE, _HEAL, _HUNT = 0, 1, 2, 3, 4, 5

# Mode reached by each order kind (index = order kind; 0 = keep is never looked up).
_MODE_OF_ORDER = np.array([_IDLE, _IDLE, _MOVE, _ATTACK, _HEAL])
# Modes in which a unit without a target walks to its order point.
_WALKS = np.array([False, True, False, True, False, True])
# Modes in which an enemy auto-acquires targets.
_ACQUIRES = np.array([False, False, False, True, False, True])

LOOPS_PER_TICK = 8
# Allies whose distance differs by less than this count as equally near when an enemy
# acquires a target; one of them is drawn at random (SC2's tie rule is unpublished, facts §12).
ACQUIRE_TIE = 2.0
COLLISION_PASSES = 3
_BORDER = 4             # blocked cells around the padded grids (> one tick of movement)
_CHASE_SLACK = 0.02     # a chasing unit stops this far inside its range
_PLACE_MARGIN = 0.25    # gap between units placed at one spawn point
_EPS = 1e-9
_ENEMY_SHOOTER_PENALTY = 1e3  # added to the distance of targets that cannot shoot back


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
    """Breadth-first distances to goal cells over a walkable grid, cached per goal."""

    _NEIGHBOURS = ((1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (1, -1), (-1, 1), (-1, -1))

    def __init__(self, walkable: np.ndarray):
        self.walkable = walkable
        self._fields: dict[tuple[int, int], np.ndarray] = {}

    def _step_ok(self, x: int, y: int, dx: int, dy: int) -> bool:
        nx, ny = x + dx, y + dy
        w = self.walkable
        if not (0 <= nx < w.shape[0] and 0 <= ny < w.shape[1] and w[nx, ny]):
            return False
        # No corner cutting: a diagonal step needs both orthogonal cells.
        return dx == 0 or dy == 0 or (w[nx, y] and w[x, ny])

    def field(self, goal: tuple[int, int]) -> np.ndarray:
        """Steps from every cell to `goal` (inf where unreachable) -> float [map_x, map_y]."""
        if goal not in self._fields:
            dist = np.full(self.walkable.shape, np.inf)
            if self.walkable[goal]:
                dist[goal] = 0.0
                queue = deque([goal])
                while queue:
                    x, y = queue.popleft()
                    for dx, dy in self._NEIGHBOURS:
                        if self._step_ok(x, y, dx, dy) and dist[x + dx, y + dy] == np.inf:
                            dist[x + dx, y + dy] = dist[x, y] + 1.0
                            queue.append((x + dx, y + dy))
            self._fields[goal] = dist
        return self._fields[goal]

    def next_cell_centre(self, cell: tuple[int, int], goal: tuple[int, int]) -> complex | None:
        """Centre of the neighbour of `cell` one step closer to `goal`; None when there is none."""
        dist = self.field(goal)
        x, y = cell
        best, best_d = None, dist[cell]
        for dx, dy in self._NEIGHBOURS:
            if self._step_ok(x, y, dx, dy) and dist[x + dx, y + dy] < best_d:
                best, best_d = (x + dx, y + dy), dist[x + dx, y + dy]
        return None if best is None else complex(best[0] + 0.5, best[1] + 0.5)


def _hex_offsets(count: int, spacing: float) -> np.ndarray:
    """Hexagonal lattice offsets around 0, nearest first, at least `count` + margin -> complex [m]."""
    rings = int(np.ceil(np.sqrt(count))) + 3
    a, b = np.meshgrid(np.arange(-rings, rings + 1), np.arange(-rings, rings + 1), indexing="ij")
    pts = (a + 0.5 * b + 1j * (np.sqrt(3.0) / 2.0) * b).ravel() * spacing  # [m]
    return pts[np.argsort(np.abs(pts), kind="stable")]


class BuiltinEngine:
    """SC2 micro simulator behind the engine contract (see the spec's ENGINE CONTRACT)."""

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
        self.n_allies, self.n_enemies = sc.n_allies, sc.n_enemies
        # Ticks must divide the step and stay below every weapon period (at most one shot each).
        self._tick_loops = max(d for d in range(1, LOOPS_PER_TICK + 1) if step_mul % d == 0)
        self._build_static(list(sc.ally_types) + list(sc.enemy_types))
        self._build_terrain()
        self._build_state()
        self.last_attacks: list[tuple[int, int]] = []

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
        self._bio_ground = column(lambda s: bool(s.attributes & us.BIOLOGICAL) and not s.is_air, bool)
        self._bursters = self._splash == us.SPLASH_BURST
        self._healers = np.flatnonzero(self._heals)
        self._any_shield = any(s.shield > 0 for s in stats)
        self._any_regen = bool((self._regen > 0).any())
        self._tick_speed = self._speed * self._tick_loops
        self._inv_speed = np.divide(1.0, self._speed, out=np.zeros(self.n), where=self._speed > 0)

    def _build_pair_tables(self, stats: list[us.UnitStats]) -> None:
        """Pairwise constants -> arrays [n, n] indexed [unit i, unit j]."""
        same_side = self._is_enemy[:, None] == self._is_enemy[None, :]
        self._raw = np.array([[us.damage_per_hit(a, t) for t in stats] for a in stats])
        self._can_attack = ~same_side & np.array(
            [[a.has_weapon and us.can_hit(a, t) for t in stats] for a in stats])
        self._reach = self._range[:, None] + self._radius[:, None] + self._radius[None, :]
        # Collision distance: only between two ground units, never a unit with itself.
        ground = ~self._is_air
        rsum = self._radius[:, None] + self._radius[None, :]
        rsum[~(ground[:, None] & ground[None, :])] = -np.inf
        np.fill_diagonal(rsum, -np.inf)
        self._rsum = rsum
        # Share of a pair's overlap that unit i gives way: mass ~ radius², immobile units never.
        mobile = self._speed > 0
        mass = self._radius ** 2
        share = mass[None, :] / (mass[:, None] + mass[None, :])
        share[:, ~mobile] = 1.0
        share[~mobile, :] = 0.0
        self._share = share
        # Tiny antisymmetric offset: two units on the same point still push apart.
        self._tie = 1e-6 * np.sign(self._idx[:, None] - self._idx[None, :]).astype(np.complex128)

    def _build_enemy_tables(self, stats: list[us.UnitStats]) -> None:
        """Constants of the enemy AI; [enemies, allies] tables."""
        na = self.n_allies
        order = self.scenario.enemy_order
        ea_attack = self._can_attack[na:, :na]
        if order.kind == "attack_units":
            allowed = np.zeros(na, dtype=bool)
            allowed[list(order.targets)] = True
            ea_attack = ea_attack & allowed[None, :]
        self._ea_attack = ea_attack
        self._ea_edge = self._radius[na:, None] + self._radius[None, :na]
        shoots_back = self._can_attack[:na, na:].T  # the ally can hit the enemy
        self._ea_penalty = np.where(shoots_back, 0.0, _ENEMY_SHOOTER_PENALTY)
        self._enemy_armed = np.array([s.has_weapon for s in stats[na:]], dtype=bool)
        self._enemy_healers = self._healers[self._healers >= na]
        self._e_rows = np.arange(self.n_enemies)
        self._e_range = self._range[na:]
        # Units ordered to attack given units chase them from anywhere.
        hunting = order.kind == "attack_units"
        self._e_scan = np.full(self.n_enemies, np.inf) if hunting else self._scan[na:]

    def _build_terrain(self) -> None:
        """Walkable grids: 0 ground, 1 cliff-walkers (Colossus), 2 air (the whole map)."""
        grid = np.asarray(self.pathing_grid, dtype=bool)
        grids = (grid, _dilate(grid), np.ones_like(grid))
        self._padded = np.stack([np.pad(g, _BORDER) for g in grids])  # [3, map_x + 2B, map_y + 2B]
        self._flows = tuple(_FlowFields(g) for g in grids)
        self._grid_of = np.where(self._is_air, 2, self._cliff.astype(np.int64))

    def _build_state(self) -> None:
        n = self.n
        self._z = np.zeros(n, dtype=np.complex128)
        hp_max = np.array([s.health for s in self._stats], dtype=np.float64)
        sh_max = np.array([s.shield for s in self._stats], dtype=np.float64)
        self.units = Units(
            n_allies=self.n_allies, n_enemies=self.n_enemies,
            unit_type=np.array(list(self.scenario.ally_types) + list(self.scenario.enemy_types),
                               dtype=np.int64),
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
        self._mobile = self._speed > 0
        self._detour = np.zeros(n, dtype=bool)  # following the flow field round an obstacle
        self._e_auto = np.zeros(self.n_enemies, dtype=bool)
        self._loop = 0
        self._deaths = False
        self._rng = np.random.default_rng([self._base_seed, 0, 1])

    # ------------------------------------------------------------------ reset
    def reset(self) -> Units:
        """Respawn both armies; placement depends only on (seed, episode number)."""
        episode, self._episode = self._episode, self._episode + 1
        spawn_rng = np.random.default_rng([self._base_seed, episode, 0])
        self._rng = np.random.default_rng([self._base_seed, episode, 1])  # weapon delays, ties
        u = self.units
        u.health[:] = u.health_max
        u.shield[:] = u.shield_max
        u.energy[:] = self._energy0
        u.weapon_cooldown[:] = 0.0
        u.alive[:] = True
        self._mobile = self._speed > 0
        self._detour[:] = False
        self._rsum_live = self._rsum.copy()
        self._last_damage[:] = -np.inf
        self._loop = 0
        self._deaths = False
        self._place(spawn_rng)
        self._target[:] = -1
        na = self.n_allies
        self._mode[:na] = _IDLE
        self._point[:na] = self._z[:na]
        self._give_enemy_orders(spawn_rng)
        self._e_auto = self._enemy_armed & _ACQUIRES[self._mode[na:]]
        self.last_attacks = []
        return u

    def _place(self, rng: np.random.Generator) -> None:
        """Units sharing a spawn point: the first on it, the others on a jittered hexagonal
        lattice around it (nearest free walkable sites first, order shuffled a little)."""
        spawns = list(self.scenario.ally_spawns) + list(self.scenario.enemy_spawns)
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
        return bool(self._padded[self._grid_of[i], int(p.real) + _BORDER, int(p.imag) + _BORDER])

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
        elif order.kind == "none":
            self._mode[e] = _ATTACK_MOVE
            self._point[e] = self._z[e]
        else:
            raise ValueError(f"unknown enemy order kind {order.kind!r} in scenario {self.map_name}")

    # ------------------------------------------------------------------ step
    def step(self, kind: np.ndarray, tx: np.ndarray, ty: np.ndarray, target: np.ndarray) -> Units:
        """Issue one order per ally (engine ally order), then advance step_mul game loops."""
        self._issue(np.asarray(kind), np.asarray(tx, dtype=np.float64),
                    np.asarray(ty, dtype=np.float64), np.asarray(target, dtype=np.int64))
        self.last_attacks = []
        for _ in range(self.step_mul // self._tick_loops):
            self._tick(self._tick_loops)
        return self.units

    def _issue(self, kind: np.ndarray, tx: np.ndarray, ty: np.ndarray, target: np.ndarray) -> None:
        na = self.n_allies
        if kind.shape != (na,):
            raise ValueError(f"step expects one order per ally ({na}), got kind of shape {kind.shape}")
        act = np.flatnonzero((kind != ORDER_KEEP) & self.units.alive[:na])
        if act.size == 0:
            return
        k = kind[act]
        if k.min() < ORDER_KEEP or k.max() > ORDER_HEAL:
            raise ValueError(f"order kinds must be 0..4 (keep, stop, move, attack, heal), got {kind}")
        aimed = act[k >= ORDER_ATTACK]
        if aimed.size and (target[aimed].min() < 0 or target[aimed].max() >= self.n):
            raise ValueError(f"attack/heal targets must be unit indices 0..{self.n - 1}, got {target}")
        self._mode[act] = _MODE_OF_ORDER[k]
        self._point[act] = np.where(k == ORDER_MOVE, tx[act] + 1j * ty[act], self._z[act])
        self._target[act] = np.where(k >= ORDER_ATTACK, target[act], -1)

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
        start = np.where(in_range, 0.0, np.inf)  # loop offset at which each unit is in range
        if movers.any():
            np.minimum(start, self._move(movers, has_t, reach), out=start)
        self._shoot(start, k)
        if self._healers.size:
            self._heal(in_range, k)
        self._collide()
        self._regenerate(k)
        self._loop += k

    def _move(self, movers: np.ndarray, has_t: np.ndarray, reach: np.ndarray) -> np.ndarray:
        """Move the movers for one tick; return the loop offset at which each chaser gets in range
        (inf for the others)."""
        z = self._z
        dest = np.where(has_t, z[self._target], self._point)
        delta = dest - z
        d = np.abs(delta)
        remaining = d - (reach - _CHASE_SLACK) * has_t
        length = np.minimum(self._tick_speed, remaining) * movers
        new = z + delta * (length / np.maximum(d, _EPS))
        arrive = np.where(movers & has_t & (remaining <= self._tick_speed),
                          np.ceil(np.maximum(remaining, 0.0) * self._inv_speed), np.inf)
        ok = self._walkable(new)
        straight = movers & ok & ~self._detour
        np.copyto(z, new, where=straight)
        # A unit that reached its move point stops there (it does not walk back when pushed).
        self._mode[straight & (self._mode == _MOVE) & (remaining <= self._tick_speed)] = _IDLE
        routed = movers & ~straight
        if routed.any():
            for i in np.flatnonzero(routed):
                z[i] = self._route(i, new[i], dest[i], bool(ok[i]))
        # Only a chaser that really got there (not detoured or blocked) may fire this tick.
        arrive[np.abs(z[self._target] - z) > reach] = np.inf
        return arrive

    def _walkable(self, p: np.ndarray) -> np.ndarray:
        """Whether each unit could stand at p (its own grid; air anywhere on the map) -> bool [n].

        The grids carry a border of blocked cells wide enough for one tick of movement, so
        positions just outside the map need no clipping."""
        cx = (p.real + _BORDER).astype(np.int64)
        cy = (p.imag + _BORDER).astype(np.int64)
        return self._padded[self._grid_of, cx, cy]

    def _route(self, i: int, wanted: complex, dest: complex, straight_ok: bool) -> complex:
        """Position of unit i after a move that the straight line cannot make (or while it is
        detouring): follow the flow field round the obstacle until the way ahead is open again,
        else slide along the wall."""
        z = complex(self._z[i])
        cell = (int(z.real), int(z.imag))
        goal = (min(max(int(dest.real), 0), self.map_x - 1),
                min(max(int(dest.imag), 0), self.map_y - 1))
        flows = self._flows[self._grid_of[i]]
        open_ahead = flows.field(goal)[cell] <= max(abs(goal[0] - cell[0]), abs(goal[1] - cell[1]))
        if open_ahead and straight_ok:
            self._detour[i] = False
            return wanted
        centre = flows.next_cell_centre(cell, goal) if cell != goal else None
        if centre is not None:
            towards = centre - z
            p = z + towards * min(1.0, abs(wanted - z) / max(abs(towards), _EPS))
            if self._walkable_point(i, p):
                self._detour[i] = True
                return p
        self._detour[i] = False
        for p in (complex(wanted.real, z.imag), complex(z.real, wanted.imag)):
            if self._walkable_point(i, p):
                return p
        return z

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
        shooters = np.flatnonzero(fire)
        order = shooters[np.lexsort((shooters, offset[shooters]))]
        delays = self._rng.uniform(*us.WEAPON_RANDOM_DELAY_LOOPS, size=order.size)
        targets = tgt[order]  # a copy: deaths during the loop clear targets
        died_at = {}
        for i, t, delay in zip(order.tolist(), targets.tolist(), delays.tolist()):
            at = offset[i]
            if died_at.get(i, at) < at:
                continue  # killed earlier in this tick
            if t in died_at:
                if died_at[t] < at:
                    continue  # target gone: retarget next tick, weapon stays ready
            else:
                self._hit(i, t, at, died_at)
            cd[i] = self._period[i] + delay - (k - at)
        if died_at:
            self._deaths = True

    def _hit(self, i: int, t: int, at: float, died_at: dict) -> None:
        """Resolve one shot of unit i at unit t (splash included)."""
        splash = self._splash[i]
        if splash == us.SPLASH_BURST:
            self._kill(i, at, died_at)  # the burst records its victims
            return
        self.last_attacks.append((i, t))
        for _ in range(self._hits[i]):
            self._damage(t, self._raw[i, t], at, died_at)
        if splash == us.SPLASH_LINE:
            self._line_splash(i, t, at, died_at)
        if t >= self.n_allies and self._mode[t] in (_ATTACK_MOVE, _HUNT) and self._target[t] < 0 \
                and self._can_attack[t, i]:
            self._target[t] = i  # respond to the attacker

    def _damage(self, t: int, raw: float, at: float, died_at: dict) -> None:
        """One hit: shields absorb first (no armour), the rest is reduced by the armour."""
        u = self.units
        if not u.alive[t]:
            return
        shield = u.shield[t]
        if shield >= raw:
            u.shield[t] = shield - raw
        else:
            u.shield[t] = 0.0
            u.health[t] -= max(0.5, raw - shield - self._armor[t])
        self._last_damage[t] = self._loop + at
        if u.health[t] <= 0.0:
            self._kill(t, at, died_at)

    def _kill(self, t: int, at: float, died_at: dict) -> None:
        if not self.units.alive[t]:
            return
        self._remove(t)
        died_at[t] = at
        if self._bursters[t]:
            self._burst(t, at, died_at)

    def _remove(self, t: int) -> None:
        """Take unit t out of the battle (health and shield 0, no orders, no collisions)."""
        u = self.units
        u.alive[t] = False
        u.health[t] = 0.0
        u.shield[t] = 0.0
        self._deaths = True
        self._mobile[t] = False
        self._target[t] = -1
        self._mode[t] = _IDLE
        self._rsum_live[t, :] = -np.inf
        self._rsum_live[:, t] = -np.inf

    def _burst(self, b: int, at: float, died_at: dict) -> None:
        """Volatile Burst around dead Baneling b: every enemy ground unit within 2.2 (edge)."""
        u = self.units
        near = np.abs(self._z - self._z[b]) <= us.BURST_RADIUS + self._radius
        victims = np.flatnonzero(near & u.alive & self._can_attack[b])
        for v in victims:
            self.last_attacks.append((b, int(v)))
            self._damage(int(v), self._raw[b, v], at, died_at)

    def _line_splash(self, i: int, t: int, at: float, died_at: dict) -> None:
        """Thermal Lances: a line across the attack direction centred on the target."""
        u = self.units
        z = self._z
        axis = z[t] - z[i]
        axis /= max(abs(axis), _EPS)
        rel = (z - z[t]) * np.conj(axis)   # [n] target frame: real = along attack, imag = across
        r = self._radius
        across = np.abs(rel.imag) <= 0.5 * us.LINE_SPLASH_LENGTH + r
        along = np.abs(rel.real) <= 0.5 * us.LINE_SPLASH_WIDTH + r
        hit = across & along & u.alive & self._can_attack[i]
        hit[t] = False
        for v in np.flatnonzero(hit):
            self.last_attacks.append((i, int(v)))
            for _ in range(self._hits[i]):
                self._damage(int(v), self._raw[i, v], at, died_at)

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

    def _collide(self) -> None:
        """Relaxation passes pushing overlapping ground units apart (immobile ones stay)."""
        z = self._z
        for _ in range(COLLISION_PASSES):
            diff = z[:, None] - z[None, :] + self._tie   # [n, n] z_i - z_j
            dist = np.abs(diff)
            overlap = self._rsum_live - dist
            if overlap.max() <= 0.0:
                return
            push = np.maximum(overlap, 0.0) * self._share / np.maximum(dist, _EPS)
            new = z + (push * diff).sum(axis=1)
            np.copyto(z, new, where=self._walkable(new))

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

    def _enemy_ai(self, dist: np.ndarray) -> None:
        """Acquire targets for attack-moving enemies (facts §12).

        An enemy without a target takes the nearest attackable ally within its scan range,
        preferring allies that can shoot back; one whose target is out of weapon range switches
        to such an ally inside weapon range when there is one."""
        na = self.n_allies
        alive = self.units.alive
        tgt = self._target[na:]
        edge = dist[na:, :na] - self._ea_edge            # [enemies, allies] edge distances
        cur = edge[self._e_rows, np.minimum(tgt, na - 1)]
        needs = self._e_auto & alive[na:] & ((tgt < 0) | (cur > self._e_range))
        if self._enemy_healers.size:
            self._medivac_ai(dist)
        if not needs.any():
            return
        noise = self._rng.uniform(0.0, ACQUIRE_TIE, edge.shape)
        score = np.where(self._ea_attack & alive[None, :na], edge + self._ea_penalty + noise, np.inf)
        in_scan = np.where(edge <= self._e_scan[:, None], score, np.inf)
        in_range = np.where(edge <= self._e_range[:, None], score, np.inf)
        best = in_scan.argmin(axis=1)
        best_r = in_range.argmin(axis=1)
        found = in_scan[self._e_rows, best] < np.inf
        found_r = in_range[self._e_rows, best_r] < np.inf
        new = np.where(tgt >= 0, np.where(found_r, best_r, tgt), np.where(found, best, -1))
        tgt[needs] = new[needs]

    def _medivac_ai(self, dist: np.ndarray) -> None:
        """Enemy Medivacs: heal the nearest damaged biological ally in sight, else follow the army."""
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
            else:
                self._target[m] = -1
                self._mode[m] = _MOVE
                self._point[m] = self._z[friends].mean() if friends.any() else self._z[m]

    # ------------------------------------------------------------------ debug commands
    def kill_units(self, indices: list[int]) -> None:
        """Remove units at once, like SC2's DebugKillUnit (no Baneling burst); for tests."""
        for t in indices:
            self._remove(int(t))

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
