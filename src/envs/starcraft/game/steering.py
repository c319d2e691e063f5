"""Movement of the built-in engine's units in one tick, compiled with Numba (see collisions.py).

`chase` plans each mover's straight step towards its target or point and `arrivals` tells when
a chaser gets in range; `steer` settles the headings and step lengths of one tick's movers
against the units near them (local avoidance) and `surround` sends melee chasers round their
target. engine.BuiltinEngine._move, _steer and _surround say what they do and why, the
functions here how. Positions and headings are complex numbers (x + iy); in `steer` a pair
(r, j) is mover m[r] and a unit j near it.
"""
import cmath
import math

import numpy as np
from numba import njit

from .collisions import R_ANCHORED, R_IDLE, R_MOVING, norm, walkable


@njit(cache=True)
def chase(z: np.ndarray, target: np.ndarray, point: np.ndarray, has_t: np.ndarray,
          movers: np.ndarray, reach: np.ndarray, tick_speed: np.ndarray, melee: np.ndarray,
          slack: float, look: float, eps: float):
    """Each unit's straight step of this tick -> (dest, d, remaining, length, heading, going,
    close), arrays [n] but close.

    dest: its target's position (has_t) or its order point; d: the distance to it; remaining:
    how far it has to go (to `slack` inside its range `reach` of the target, or to the point);
    length: its step, at most tick_speed (0 for units not among the movers); heading: the unit
    vector to dest; going: movers with a step to take; close: the melee chasers that are going
    and within `look` of their range (candidates for surround)."""
    n = z.size
    dest = np.empty(n, dtype=np.complex128)
    heading = np.empty(n, dtype=np.complex128)
    d, remaining, length = np.empty(n), np.empty(n), np.empty(n)
    going = np.empty(n, dtype=np.bool_)
    close = []
    for i in range(n):
        dest[i] = z[target[i]] if has_t[i] else point[i]
        dx, dy = dest[i].real - z[i].real, dest[i].imag - z[i].imag
        d[i] = norm(dx, dy)
        remaining[i] = d[i] - (reach[i] - slack) if has_t[i] else d[i]
        length[i] = max(min(tick_speed[i], remaining[i]), 0.0) if movers[i] else 0.0
        scale = 1.0 / (max(d[i], eps) + 0.0 * 0.0)  # as NumPy divides a complex by a real
        heading[i] = complex((dx + dy * 0.0) * scale, (dy - dx * 0.0) * scale)
        going[i] = movers[i] and length[i] > 0.0
        if going[i] and has_t[i] and melee[i] and remaining[i] < look:
            close.append(i)
    return dest, d, remaining, length, heading, going, np.array(close, dtype=np.int64)


@njit(cache=True)
def arrivals(z: np.ndarray, target: np.ndarray, movers: np.ndarray, has_t: np.ndarray,
             remaining: np.ndarray, tick_speed: np.ndarray, blocked: np.ndarray,
             inv_speed: np.ndarray, reach: np.ndarray) -> np.ndarray:
    """Loop offset in the tick at which each chaser got in range of its target (inf for the
    others): only one that really got there, within reach after the step (not steered off or
    blocked by the terrain), at remaining / speed."""
    arrive = np.full(z.size, np.inf)
    for i in range(z.size):
        if not (movers[i] and has_t[i] and remaining[i] <= tick_speed[i] and not blocked[i]):
            continue
        t = target[i]
        if norm(z[t].real - z[i].real, z[t].imag - z[i].imag) <= reach[i]:
            arrive[i] = np.ceil(max(remaining[i], 0.0) * inv_speed[i])
    return arrive


@njit(cache=True)
def _near_pairs(m, z, heading, length, rank, dist, rsum, reach_extra, is_enemy, last_step):
    """Pairs (row of m, unit) whose disks can meet this tick and that the mover does not simply
    push (idle friends, friends moving its way at at least half its speed) -> (rows, units,
    solid: the unit does not give way, crossing: a mover coming the other way or much slower)."""
    n = z.size
    rows = np.empty(m.size * n, dtype=np.int64)
    units = np.empty(m.size * n, dtype=np.int64)
    solid = np.empty(m.size * n, dtype=np.bool_)
    crossing = np.empty(m.size * n, dtype=np.bool_)
    k = 0
    for r in range(m.size):
        i = m[r]
        for j in range(n):
            if not dist[i, j] < rsum[i, j] + (length[i] + reach_extra):
                continue
            friend = is_enemy[i] == is_enemy[j]
            other = rank[j]
            if not friend and other == R_IDLE:
                other = R_ANCHORED  # units cannot push enemy units
            along = heading[i].real * heading[j].real + heading[i].imag * heading[j].imag
            cross = along < 0.5 or last_step[j] < 0.5 * length[i]
            if other == R_IDLE or (friend and other == R_MOVING and not cross):
                continue
            rows[k], units[k], solid[k], crossing[k] = r, j, other > R_MOVING, cross
            k += 1
    return rows[:k], units[:k], solid[:k], crossing[:k]


@njit(cache=True)
def _components(cols, dist, radius, gap):
    """Labels of the connected components of units `cols`, two joined where the gap between
    their edges is under `gap` -> int [cols]."""
    c = cols.size
    label = np.full(c, -1, dtype=np.int64)
    queue = np.empty(c, dtype=np.int64)
    for start in range(c):
        if label[start] >= 0:
            continue
        label[start] = start
        queue[0], head, tail = start, 0, 1
        while head < tail:
            a = queue[head]
            head += 1
            for b in range(c):
                if label[b] < 0 and dist[cols[a], cols[b]] - radius[cols[a]] - radius[cols[b]] < gap:
                    label[b] = start
                    queue[tail] = b
                    tail += 1
    return label


@njit(cache=True)
def _turn_round(i, members, z, heading, goal, radius, side, tol, eps):
    """Head mover i along the tangent to the group `members` (unit indices) on the side of the
    shorter way to its goal (on a tie the side it turned to last); a side on which the group
    reaches round behind the mover is closed -> whether it turned (heading, side in place)."""
    best = (-np.inf, np.inf)        # extreme bearings: left (max of bearing + half), right (min)
    far = (0.0, 0.0)
    touch = (0.0, 0.0)
    frame = heading[i].conjugate()
    for j in members:
        rel = (z[j] - z[i]) * frame                 # mover frame, heading +x
        d = norm(rel.real, rel.imag)
        contact = radius[i] + radius[j] + tol
        half = math.asin(min(contact / max(d, eps), 1.0))
        bearing = math.atan2(rel.imag, rel.real)
        if bearing + half > best[0]:
            best, far, touch = (bearing + half, best[1]), (d, far[1]), (contact, touch[1])
        if bearing - half < best[1]:
            best, far, touch = (best[0], bearing - half), (far[0], d), (touch[0], contact)
    costs = np.full(2, np.inf)
    for s in range(2):
        if abs(best[s]) < math.pi:
            tangent = math.sqrt(max(far[s] * far[s] - touch[s] * touch[s], 0.0))
            point = z[i] + tangent * heading[i] * cmath.exp(1j * best[s])
            costs[s] = tangent + abs(goal[i] - point)
    use_left = costs[0] < costs[1] or (costs[0] == costs[1] and side[i] >= 0.0)
    s = 0 if use_left else 1
    if not math.isfinite(costs[s]):
        return False
    side[i] = 1.0 if use_left else -1.0
    heading[i] = heading[i] * cmath.exp(1j * best[s])
    return True


@njit(cache=True)
def _round_groups(movers, firsts, z, heading, goal, rank, dist, rsum, alive, is_enemy, layer,
                  radius, target, side, tol, eps):
    """Head movers blocked by a unit (firsts[k], the first in the way of movers[k]) round the
    group that unit stands in: it and the units standing in the mover's way the same way (its
    enemies, its friends standing to attack or immobile) of its collision layer, joined where
    the gap between two is narrower than the mover; the mover and its target left out.
    -> bool [movers]: headed round (groups closed on both sides are left to the caller)."""
    done = np.zeros(movers.size, dtype=np.bool_)
    n = z.size
    # Groups are told apart per side, collision layer and radius of the movers (a few kinds).
    key = (is_enemy[movers] * 8 + layer[movers]) * 1000 + np.rint(radius[movers] * 64)
    handled = np.zeros(movers.size, dtype=np.bool_)
    for k in range(movers.size):
        if handled[k]:
            continue
        rep = movers[k]
        kind = np.nonzero(key == key[k])[0]
        handled[kind] = True
        blocks = np.zeros(n, dtype=np.bool_)
        for u in range(n):
            stands = alive[u] and rank[u] >= R_ANCHORED
            blocks[u] = (stands or (alive[u] and is_enemy[u] != is_enemy[rep])) and math.isfinite(rsum[rep, u])
        blocks[firsts[kind]] = True
        cols = np.nonzero(blocks)[0]
        pos = np.full(n, -1, dtype=np.int64)
        pos[cols] = np.arange(cols.size)
        label = _components(cols, dist, radius, 2.0 * (radius[rep] + tol))
        for q in kind:
            i = movers[q]
            group = cols[label == label[pos[firsts[q]]]]
            group = group[(group != i) & (group != target[i])]
            done[q] = _turn_round(i, group, z, heading, goal, radius, side, tol, eps)
    return done


@njit(cache=True)
def _first_in_way(rows, units, solid, crossing, m, z, heading, length, rsum, target):
    """For each mover the pair of the first unit in its way (the mover's disk sweeping its step
    reaches that unit's; a chaser does not avoid its target) -> int [m]: pair index or -1."""
    first = np.full(m.size, -1, dtype=np.int64)
    nearest = np.full(m.size, np.inf)
    for p in range(rows.size):
        r, j = rows[p], units[p]
        i = m[r]
        if not (solid[p] or crossing[p]) or j == target[i]:
            continue
        local = (z[j] - z[i]) * heading[i].conjugate()   # mover frame, heading +x
        along, across = local.real, local.imag
        past = max(along - length[i], 0.0)
        rs = rsum[i, j]
        if along > 0.0 and past * past + across * across < rs * rs and along < nearest[r]:
            nearest[r], first[r] = along, p
    return first


@njit(cache=True)
def _settle(rows, units, solid, m, z, heading, length, rsum, rounds, tol, eps):
    """Settle the movers' steps against one another (lengths only ever shorten): touching and
    closing, a mover gives up its share of the closing speed along its most closing contact;
    otherwise its step ends at the first contact during the tick, both at their planned
    velocities."""
    n_pairs, n = rows.size, z.size
    rel = np.empty(n_pairs, dtype=np.complex128)
    qc, gap_dist = np.empty(n_pairs), np.empty(n_pairs)
    touching = np.empty(n_pairs, dtype=np.bool_)
    for p in range(n_pairs):
        i, j = m[rows[p]], units[p]
        rel[p] = z[j] - z[i]
        rs = rsum[i, j]
        qc[p] = rel[p].real * rel[p].real + rel[p].imag * rel[p].imag - rs * rs  # <= 0: touching
        touching[p] = qc[p] <= 2.0 * tol * rs
        gap_dist[p] = math.sqrt(max(qc[p] + rs * rs, eps))
    vel = np.empty(n, dtype=np.complex128)
    qb = np.empty(n_pairs)
    for _ in range(rounds):
        _closing_rates(rows, units, m, rel, heading, length, vel, qb)
        if not (qb < 0.0).any():
            return
        changed = False
        worst = np.zeros(m.size)
        pick = np.full(m.size, -1, dtype=np.int64)
        for p in range(n_pairs):
            if qb[p] < 0.0 and touching[p]:
                rate = qb[p] / gap_dist[p]
                if rate < worst[rows[p]]:
                    worst[rows[p]], pick[rows[p]] = rate, p
        for r in range(m.size):
            p = pick[r]
            if p < 0:
                continue
            i = m[r]
            share = 1.0 if solid[p] else 0.5    # of the closing speed that the mover takes up
            v = vel[i] + share * worst[r] * rel[p] / gap_dist[p]
            speed = abs(v)
            length[i] = speed
            if speed > eps:
                heading[i] = v / speed
            changed = True
        if changed:
            _closing_rates(rows, units, m, rel, heading, length, vel, qb)
        frac = np.ones(m.size)
        for p in range(n_pairs):
            i, j = m[rows[p]], units[p]
            dv = vel[j] - vel[i]
            qa = dv.real * dv.real + dv.imag * dv.imag
            if qb[p] < 0.0 and qa > eps and not touching[p]:
                disc = qb[p] * qb[p] - qa * qc[p]
                if disc >= 0.0:
                    tau = (-qb[p] - math.sqrt(disc)) / qa
                    if tau < 1.0:
                        frac[rows[p]] = min(frac[rows[p]], max(tau, 0.0))
        if (frac < 1.0).any():
            for r in range(m.size):
                length[m[r]] *= frac[r]
            changed = True
        if not changed:
            return


@njit(cache=True)
def _closing_rates(rows, units, m, rel, heading, length, vel, qb) -> None:
    """vel: every unit's displacement this tick; qb: per pair, rel . (v_j - v_i) (< 0: closing)."""
    for u in range(vel.size):
        vel[u] = heading[u] * length[u]
    for p in range(rows.size):
        dv = vel[units[p]] - vel[m[rows[p]]]
        qb[p] = rel[p].real * dv.real + rel[p].imag * dv.imag


@njit(cache=True)
def steer(m: np.ndarray, z: np.ndarray, heading: np.ndarray, length: np.ndarray, rank: np.ndarray,
          dist: np.ndarray, goal: np.ndarray, rsum: np.ndarray, reach_extra: float,
          is_enemy: np.ndarray, last_step: np.ndarray, target: np.ndarray, side: np.ndarray,
          alive: np.ndarray, layer: np.ndarray, radius: np.ndarray, rounds: int, tol: float,
          eps: float) -> None:
    """Headings and step lengths (in place) of movers m (ascending unit indices) for this tick
    (engine.BuiltinEngine._steer). side: the side (+1 left, -1 right) each mover last turned
    to round a unit, kept while its way stays blocked, else reset to 0."""
    rows, units, solid, crossing = _near_pairs(m, z, heading, length, rank, dist, rsum,
                                               reach_extra, is_enemy, last_step)
    if rows.size == 0:
        return
    first = _first_in_way(rows, units, solid, crossing, m, z, heading, length, rsum, target)
    for r in range(m.size):
        if first[r] < 0:
            side[m[r]] = 0.0
    blocked = np.nonzero(first >= 0)[0]
    if blocked.size:
        movers, pairs = m[blocked], first[blocked]
        rounded = _round_groups(movers, units[pairs], z, heading, goal, rank, dist, rsum, alive,
                                is_enemy, layer, radius, target, side, tol, eps)
        for q in range(movers.size):
            if not rounded[q]:
                _sidestep(movers[q], units[pairs[q]], z, heading, rsum, side, tol, eps)
    _settle(rows, units, solid, m, z, heading, length, rsum, rounds, tol, eps)


@njit(cache=True)
def _sidestep(i, j, z, heading, rsum, side, tol, eps) -> None:
    """Mover i, boxed in round unit j, heads along the tangent to j's contact circle on one
    side, which it keeps until its way is clear (first pick: away from j's side of its path)."""
    to = z[j] - z[i]
    if side[i] == 0.0:
        across = (to * heading[i].conjugate()).imag
        side[i] = -1.0 if across > 0 else 1.0 if across < 0 else (1.0 if i % 2 == 0 else -1.0)
    d = abs(to)
    angle = math.asin(min((rsum[i, j] + tol) / max(d, eps), 1.0))
    heading[i] = to / max(d, eps) * cmath.exp(1j * side[i] * angle)


@njit(cache=True)
def surround(close: np.ndarray, z: np.ndarray, target: np.ndarray, ring: np.ndarray,
             places: np.ndarray, rsum: np.ndarray, dist: np.ndarray, padded: np.ndarray,
             border: int, grid: np.ndarray, heading: np.ndarray, length: np.ndarray,
             tick_speed: np.ndarray, tol: float, eps: float) -> None:
    """Melee chasers `close` whose place on their target's near side is taken head for the
    nearest free place round it (engine.BuiltinEngine._surround); heading and length of those
    that find one are changed in place.

    ring: the centre distance at which each unit is in range of its target [n]; places: unit
    vectors of the places round a target a chaser considers [k]. A place is free when the
    chaser could stand there: walkable, and no unit of its collision layer but the target
    overlapping it (by more than tol)."""
    spots = np.empty(1 + places.size, dtype=np.complex128)
    for i in close:
        t = target[i]
        centre = z[t]
        away = z[i] - centre
        spots[0] = centre + ring[i] * away / max(norm(away.real, away.imag), eps)  # straight in
        spots[1:] = centre + ring[i] * places
        free = np.empty(spots.size, dtype=np.bool_)
        for s in range(spots.size):
            free[s] = walkable(padded, border, grid[i], spots[s].real, spots[s].imag)
        # Only a unit within ring + rs of the target can stand on a place round it (a margin
        # of 1 covers rounding).
        for j in range(z.size):
            rs = rsum[i, j]
            if j == t or not math.isfinite(rs) or not dist[t, j] < ring[i] + rs + 1.0:
                continue
            for s in range(spots.size):
                if abs(spots[s] - z[j]) - rs < -tol:
                    free[s] = False
        if free[0]:
            continue
        best, cost = -1, np.inf
        for s in range(1, spots.size):
            if free[s] and abs(spots[s] - z[i]) < cost:
                best, cost = s, abs(spots[s] - z[i])
        if best < 0:
            continue
        to = spots[best] - z[i]
        far = abs(to)
        heading[i] = to / max(far, eps)
        length[i] = min(tick_speed[i], far)
