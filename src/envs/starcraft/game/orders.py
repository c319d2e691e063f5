"""Orders and targets of the built-in engine's units, compiled with Numba (see collisions.py).

`issue` hands the agents' orders to their units; `acquire` is the computer player's automatic
target acquisition (engine.BuiltinEngine._enemy_ai says which rule the game follows). As NumPy
array operations the two cost some thirty calls on small arrays every step, a quarter of a step
on small maps. Only copies, subtractions and comparisons: the same orders and targets as the
array form, bit for bit, ties going to the lowest ally index as `argmin` gives them.
"""
import numpy as np
from numba import njit

# Order kinds of BuiltinEngine.step (engine.ORDER_KEEP ... ORDER_HEAL): keep the current order,
# stop, move to a point, attack a unit, heal a unit.
ORDER_KINDS = KEEP, STOP, MOVE, ATTACK, HEAL = 0, 1, 2, 3, 4
BAD_KIND, BAD_TARGET = 1, 2  # what `issue` found wrong


@njit(cache=True)
def _acts(kind, alive, a: int) -> bool:
    """Whether ally a takes a new order: it is alive and its order is not "keep"."""
    return kind[a] != KEEP and alive[a]


@njit(cache=True)
def issue(kind, tx, ty, target, n: int, alive, mode_of_order, mode, point, z, tgt) -> int:
    """Give each living ally its order (in place: mode, point, tgt [n]) -> 0, or BAD_KIND / BAD_TARGET
    (an order kind outside 0..4, an attack or heal target outside 0..n-1: nothing is changed).

    kind, tx, ty, target: one order per ally [allies]; a move goes to (tx, ty), an attack or heal
    at unit `target`; every other order leaves the unit where it stands, with no target."""
    na = kind.size
    for a in range(na):
        if _acts(kind, alive, a) and (kind[a] < KEEP or kind[a] > HEAL):
            return BAD_KIND
    for a in range(na):
        if _acts(kind, alive, a) and kind[a] >= ATTACK and (target[a] < 0 or target[a] >= n):
            return BAD_TARGET
    for a in range(na):
        if not _acts(kind, alive, a):
            continue
        k = kind[a]
        mode[a] = mode_of_order[k]
        point[a] = complex(tx[a], ty[a]) if k == MOVE else z[a]
        tgt[a] = target[a] if k >= ATTACK else -1
    return 0


@njit(cache=True)
def _class_of(e: int, a: int, na: int, alive, attack, klass) -> float:
    """Targeting class of ally a for enemy e; -1 where e cannot attack it (or it is dead)."""
    return klass[e, a] if attack[e, a] and alive[a] else -1.0


@njit(cache=True)
def _keeps(e: int, cur: int, na: int, dist, alive, attack, klass, edge, weapon) -> bool:
    """Whether enemy e keeps target cur: still in weapon range, no better class in it."""
    row = na + e
    if dist[row, cur] - edge[e, cur] > weapon[e]:
        return False
    cur_class = _class_of(e, cur, na, alive, attack, klass)
    for a in range(na):
        if dist[row, a] - edge[e, a] <= weapon[e] and _class_of(e, a, na, alive, attack, klass) > cur_class:
            return False
    return True


@njit(cache=True)
def _best_in_scan(e: int, na: int, dist, alive, attack, klass, edge, scan) -> int:
    """The best-class ally within enemy e's scan range, the nearest (edge to edge) of that
    class; -1 if none it can attack is there."""
    row = na + e
    top, best, best_edge = -1.0, -1, np.inf
    for a in range(na):
        gap = dist[row, a] - edge[e, a]
        if not gap <= scan[e]:
            continue
        c = _class_of(e, a, na, alive, attack, klass)
        if c < 0.0 or c < top:
            continue
        if c > top or gap < best_edge:
            top, best, best_edge = c, a, gap
    return best


@njit(cache=True)
def acquire(dist, na: int, alive, target, auto, attack, klass, edge, weapon, scan) -> None:
    """Targets (in place, `target` [n]) of the enemies that acquire automatically.

    dist: centre distances [n, n]; auto: which enemies acquire [enemies]; attack, klass, edge:
    [enemies, allies] whether e's weapon can hit a, a's targeting class for e, their radius sum;
    weapon, scan: each enemy's weapon and scan range [enemies]. A target is kept while
    `_keeps`; otherwise the enemy takes `_best_in_scan`, or keeps chasing when that is none."""
    for e in range(auto.size):
        if not auto[e]:
            continue
        cur = target[na + e]
        if cur >= 0 and _keeps(e, min(cur, na - 1), na, dist, alive, attack, klass, edge, weapon):
            continue
        best = _best_in_scan(e, na, dist, alive, attack, klass, edge, scan)
        if best >= 0:
            target[na + e] = best
