"""Weapons, damage and deaths of the built-in engine, compiled with Numba (see collisions.py).

`fire` resolves one tick's shots in loop order (engine.BuiltinEngine._shoot says when each
unit fires); `remove` takes a unit out of the battle. As Python the shots cost some ten
microseconds each, a tenth of a tick on busy maps. The arithmetic is the Python code's, in
the same order, so the same shots do the same damage bit for bit.

The units' state and constants reach the loops as one `Army` (arrays [n] unless said; the
state ones changed in place).
"""
from collections import namedtuple

import numpy as np
from numba import njit

from . import units as us
from .collisions import EPS, fma, norm

Army = namedtuple("Army", [
    "z",            # positions, complex
    "alive", "health", "shield",
    "last_damage",  # game loop of each unit's last damage taken (shields wait after it)
    "mobile", "target", "mode",
    "rsum",         # [n, n] radius sums of the pairs that collide, -inf once one is dead
    "pair_a", "pair_b", "pair_rsum",  # the colliding pairs [P] and their radius sums
    "radius", "armor",
    "raw",          # [n, n] damage of one hit of i's weapon on j (bonus included, no armour)
    "can_attack",   # [n, n] whether i's weapon can hit j
    "hits",         # hits per attack
    "splash",       # us.SPLASH_NONE, SPLASH_LINE or SPLASH_BURST
    "acquires",     # [modes] whether a unit in that mode acquires targets (and answers attackers)
    "idle",         # the mode of a dead unit
    "n_allies",
])


@njit(cache=True)
def remove(army: Army, t: int) -> None:
    """Take unit t out of the battle (health and shield 0, no orders, no collisions)."""
    army.alive[t] = False
    army.health[t] = 0.0
    army.shield[t] = 0.0
    army.mobile[t] = False
    army.target[t] = -1
    army.mode[t] = army.idle
    army.rsum[t, :] = -np.inf
    army.rsum[:, t] = -np.inf
    for p in range(army.pair_a.size):
        if army.pair_a[p] == t or army.pair_b[p] == t:
            army.pair_rsum[p] = -np.inf


@njit(cache=True)
def _die(army: Army, t: int, at: float, died: np.ndarray) -> bool:
    """Unit t dies at loop offset `at` of the tick -> whether it bursts (a Baneling)."""
    if not army.alive[t]:
        return False
    remove(army, t)
    died[t] = at
    return army.splash[t] == us.SPLASH_BURST


@njit(cache=True)
def _damage(army: Army, t: int, raw: float, at: float, loop: int, died: np.ndarray) -> bool:
    """One hit: shields absorb first (no armour), the rest is reduced by the armour -> whether
    it killed a Baneling (whose burst is then due)."""
    if not army.alive[t]:
        return False
    shield = army.shield[t]
    if shield >= raw:
        army.shield[t] = shield - raw
    else:
        army.shield[t] = 0.0
        army.health[t] -= max(0.5, raw - shield - army.armor[t])
    army.last_damage[t] = loop + at
    return army.health[t] <= 0.0 and _die(army, t, at, died)


@njit(cache=True)
def _burst_victims(army: Army, b: int) -> np.ndarray:
    """The units Baneling b's burst hits as they stand: every enemy ground unit within 2.2 (edge)."""
    z = army.z
    return np.array([v for v in range(z.size)
                     if norm(z[v].real - z[b].real, z[v].imag - z[b].imag) <= us.BURST_RADIUS + army.radius[v]
                     and army.alive[v] and army.can_attack[b, v]], dtype=np.int64)


@njit(cache=True)
def _bursts(army: Army, first: int, at: float, loop: int, died: np.ndarray, attacks: list) -> None:
    """Volatile Burst of dead Baneling `first`, and of every Baneling a burst kills, depth
    first: each burst hits its victims in index order, and a victim that bursts in turn does so
    before the next victim is hit. (A loop over a stack: Numba's cache cannot hold recursion.)"""
    bursters, victims, done = [first], [_burst_victims(army, first)], [0]
    while bursters:
        b, hit = bursters[-1], done[-1]
        if hit == victims[-1].size:
            bursters.pop()
            victims.pop()
            done.pop()
            continue
        done[-1] = hit + 1
        v = victims[-1][hit]
        attacks.append((b, v))
        if _damage(army, v, army.raw[b, v], at, loop, died):
            bursters.append(v)
            victims.append(_burst_victims(army, v))
            done.append(0)


@njit(cache=True)
def _hits_on(army: Army, i: int, t: int, at: float, loop: int, died: np.ndarray, attacks: list) -> None:
    """The hits of one attack of unit i on unit t."""
    attacks.append((i, t))
    for _ in range(army.hits[i]):
        if _damage(army, t, army.raw[i, t], at, loop, died):
            _bursts(army, t, at, loop, died, attacks)


@njit(cache=True)
def _line_splash(army: Army, i: int, t: int, at: float, loop: int, died: np.ndarray,
                 attacks: list) -> None:
    """Thermal Lances: a line across the attack direction centred on the target."""
    z = army.z
    ax, ay = z[t].real - z[i].real, z[t].imag - z[i].imag
    scale = 1.0 / max(np.hypot(ax, ay), EPS)
    ax, ay = ax * scale, ay * scale
    half_length, half_width = 0.5 * us.LINE_SPLASH_LENGTH, 0.5 * us.LINE_SPLASH_WIDTH
    victims = []
    for v in range(z.size):
        # v in the target's frame: along the attack, and across it.
        dx, dy = z[v].real - z[t].real, z[v].imag - z[t].imag
        along, across = fma(dx, ax, dy * ay), fma(dx, -ay, dy * ax)  # (dx + i dy) * conj(axis)
        if (abs(across) <= half_length + army.radius[v] and abs(along) <= half_width + army.radius[v]
                and army.alive[v] and army.can_attack[i, v] and v != t):
            victims.append(v)
    for v in victims:
        _hits_on(army, i, v, at, loop, died, attacks)


@njit(cache=True)
def _hit(army: Army, i: int, t: int, at: float, loop: int, died: np.ndarray, attacks: list) -> None:
    """Resolve one shot of unit i at unit t (splash included)."""
    if army.splash[i] == us.SPLASH_BURST:
        if _die(army, i, at, died):  # the burst records its victims
            _bursts(army, i, at, loop, died, attacks)
        return
    _hits_on(army, i, t, at, loop, died, attacks)
    if army.splash[i] == us.SPLASH_LINE:
        _line_splash(army, i, t, at, loop, died, attacks)
    if t >= army.n_allies and army.acquires[army.mode[t]] and army.target[t] < 0 \
            and army.can_attack[t, i]:
        army.target[t] = i  # respond to the attacker (stock units: Response=Acquire)


@njit(cache=True)
def fire(army: Army, order: np.ndarray, delays: np.ndarray, offset: np.ndarray,
         cooldown: np.ndarray, period: np.ndarray, k: int, loop: int) -> tuple[list, bool]:
    """The shots of one tick, in loop order: unit order[s] fires at its target at loop offset
    offset[order[s]], unless it or its target died earlier in the tick; its weapon is then
    ready again period + delays[s] loops after the shot (cooldown in place, counted from the
    tick's end). -> (the (attacker, victim) pairs of every hit, whether anyone died)."""
    targets = army.target[order]  # a copy: deaths during the loop clear targets
    died = np.full(army.z.size, np.inf)  # loop offset of each death in this tick
    attacks = [(0, 0) for _ in range(0)]
    for s in range(order.size):
        i, t = order[s], targets[s]
        at = offset[i]
        if died[i] < at:
            continue  # killed earlier in this tick
        if died[t] < at:
            continue  # target gone: retarget next tick, weapon stays ready
        if died[t] == np.inf:
            _hit(army, i, t, at, loop, died, attacks)
        cooldown[i] = period[i] + delays[s] - (k - at)
    return attacks, bool((died < np.inf).any())
