"""Compiled inner loops of the built-in engine: walkable ground and the collision solver.

The collision solver sweeps over a few hundred pairs up to COLLISION_MAX_ITERS times a tick;
written as NumPy array operations each sweep cost a dozen calls on small arrays, most of a
crowded map's tick (see docs/simulator.md, "Speed"). Here the same arithmetic runs as plain
loops compiled by Numba (`cache=True`: compiled once per machine, into __pycache__).

The loops do the NumPy code's floating-point operations in the same order (sums in pair order,
the centre distance as NumPy's complex abs computes it), so the engine's numbers do not depend
on which of the two ran them.

Pathing grids (`padded`, uint8 [grids, side, side]) hold for each cell the codes of
engine._cell_parts: 15 a walkable cell, 0 a blocked one, else bits 1, 2, 4, 8 for the walkable
triangle at the bottom-left (x + y <= 1 inside the cell), bottom-right (x >= y), top-left
(y >= x) and top-right (x + y >= 1) corner of a cell cut by a diagonal cliff. Each grid carries
a border of `border` blocked cells.
"""
import math

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

WHOLE = 15  # code of a walkable cell
# Pushing ranks (who gives way in a collision): the lower rank gives way to the higher; equal
# ranks share the correction by mass (radius squared).
R_IDLE, R_MOVING, R_ANCHORED, R_FIXED = 0, 1, 2, 3
EPS = 1e-9  # the engine's floor for lengths it divides by


@intrinsic
def fma(typingctx, a, b, c):
    """a * b + c rounded once (fused multiply-add), as NumPy's complex multiply computes its
    parts on CPUs that have it: real = fma(ar, br, -(ai * bi)), imag = fma(ar, bi, ai * br)."""
    def codegen(context, builder, signature, args):
        return builder.fma(*args)
    return types.float64(types.float64, types.float64, types.float64), codegen


@njit(cache=True, fastmath={"contract"})
def norm(x: float, y: float) -> float:
    """|x + iy| as NumPy's complex abs computes it on this machine's vector units: the larger
    component times sqrt(1 + ratio**2), the inner sum fused (fma) where the CPU has it."""
    x, y = abs(x), abs(y)
    big, small = max(x, y), min(x, y)
    if big == 0.0 or math.isinf(big):
        return big
    ratio = small / big
    return math.sqrt(ratio * ratio + 1.0) * big


@njit(cache=True)
def walkable(padded: np.ndarray, border: int, g: int, x: float, y: float) -> bool:
    """Whether the point (x, y) lies on walkable ground of grid g (not a finite point: no)."""
    if not (abs(x) < 1e15 and abs(y) < 1e15):
        return False
    side = padded.shape[1]
    fx, fy = math.floor(x), math.floor(y)
    cx = min(max(int(fx) + border, 0), side - 1)
    cy = min(max(int(fy) + border, 0), side - 1)
    parts = padded[g, cx, cy]
    if parts == WHOLE:
        return True
    if parts == 0:
        return False
    fx, fy = x - fx, y - fy
    s = fx + fy
    sides = (1 if s <= 1.0 else 0) | (2 if fx >= fy else 0) | (4 if fy >= fx else 0) \
        | (8 if s >= 1.0 else 0)
    return (parts & sides) != 0


@njit(cache=True)
def walkable_points(padded: np.ndarray, border: int, grid: np.ndarray, p: np.ndarray) -> np.ndarray:
    """walkable() of each point p[i] (complex) on grid[i] (flat arrays of one length) -> bool [points]."""
    out = np.empty(p.size, dtype=np.bool_)
    for i in range(p.size):
        out[i] = walkable(padded, border, grid[i], p[i].real, p[i].imag)
    return out


@njit(cache=True)
def slide(padded: np.ndarray, border: int, g: int, x: float, y: float,
          sx: float, sy: float) -> tuple[float, float, bool]:
    """A step (sx, sy) from (x, y) that the terrain blocks slides along the wall: it keeps its
    walkable axis (x first), else the unit stays -> (x, y, whether it moved)."""
    if walkable(padded, border, g, x + sx, y):
        return x + sx, y, True
    if walkable(padded, border, g, x, y + sy):
        return x, y + sy, True
    return x, y, False


@njit(cache=True)
def lines_blocked(padded: np.ndarray, border: int, grid: np.ndarray, z: np.ndarray,
                  units: np.ndarray, dest: np.ndarray, fractions: np.ndarray) -> np.ndarray:
    """Whether the straight line from each unit units[r] to dest[r] crosses ground its grid
    blocks, tested at `fractions` (0..1) of the way -> bool [units]."""
    out = np.zeros(units.size, dtype=np.bool_)
    for r in range(units.size):
        i = units[r]
        x, y = z[i].real, z[i].imag
        sx, sy = dest[r].real - x, dest[r].imag - y
        for f in fractions:
            if not walkable(padded, border, grid[i], x + sx * f, y + sy * f):
                out[r] = True
                break
    return out


@njit(cache=True)
def advance(padded: np.ndarray, border: int, grid: np.ndarray, z: np.ndarray, going: np.ndarray,
            heading: np.ndarray, length: np.ndarray, blocked: np.ndarray, last_step: np.ndarray) -> None:
    """Move each unit that is `going` by heading * length (z in place); a step the terrain
    blocks slides along the wall (slide()). Writes blocked (whether the terrain blocked the
    step) and last_step (the distance moved, 0 for the others) [n]."""
    for i in range(z.size):
        blocked[i] = False
        last_step[i] = 0.0
        if not going[i]:
            continue
        x0, y0 = z[i].real, z[i].imag
        sx, sy = heading[i].real * length[i], heading[i].imag * length[i]
        x, y = x0 + sx, y0 + sy
        if not walkable(padded, border, grid[i], x, y):
            blocked[i] = True
            x, y, _ = slide(padded, border, grid[i], x0, y0, sx, sy)
        last_step[i] = norm(x - x0, y - y0)
        z[i] = complex(x, y)


@njit(cache=True)
def pair_shares(mass_a: float, mass_b: float, same_side: bool, rank_a: int, rank_b: int,
                by_mass: bool) -> tuple[float, float]:
    """Fractions of a pair's correction taken by a and by b.

    The pushing rules proper act in the movement (engine._steer: movers never walk into units
    they cannot push); here they only decide the one case the movement leaves to the solver, a
    mover pushing an idle friend, who gives way (not `by_mass`: once jammed, everyone shares).
    Everything else shares by mass; a unit that cannot move (a structure, or one pinned against
    a wall) takes no share, jammed or not."""
    share_a = mass_b / (mass_a + mass_b)
    if not by_mass and same_side:
        if rank_a == R_IDLE and rank_b == R_MOVING:
            share_a = 1.0
        elif rank_b == R_IDLE and rank_a == R_MOVING:
            share_a = 0.0
    if rank_a == R_FIXED:
        return 0.0, 0.0 if rank_b == R_FIXED else 1.0
    if rank_b == R_FIXED:
        return 1.0, 0.0
    return share_a, 1.0 - share_a


@njit(cache=True)
def _fill_shares(la, lb, mass_a, mass_b, same_side, rank, by_mass, share_a, share_b) -> None:
    for p in range(la.size):
        share_a[p], share_b[p] = pair_shares(mass_a[p], mass_b[p], same_side[p],
                                             rank[la[p]], rank[lb[p]], by_mass)


@njit(cache=True)
def solve_sweeps(z: np.ndarray, la: np.ndarray, lb: np.ndarray, rsum: np.ndarray,
                 tie: np.ndarray, mass_a: np.ndarray, mass_b: np.ndarray, same_side: np.ndarray,
                 rank: np.ndarray, grid: np.ndarray, padded: np.ndarray, border: int,
                 jammed: bool, tol: float, eps: float, relax: float,
                 max_sweeps: int, rule_sweeps: int) -> None:
    """Sweeps of the collision solver over pairs (la[p], lb[p]) of units z (local indices),
    until no pair overlaps by more than tol (see engine._separate for the method).

    z: complex [units], changed in place; rsum, tie: radius sums and tie-break offsets [pairs];
    rank: int [units], a unit found stuck against a wall is set to R_FIXED; grid: int [units].
    A sweep moves each unit by relax times the mean of the corrections it takes from its
    touching pairs (every pair's correction separates it fully)."""
    n_pairs, n = la.size, z.size
    share_a, share_b = np.empty(n_pairs), np.empty(n_pairs)
    fx, fy = np.empty(n_pairs), np.empty(n_pairs)   # push of a off b, full correction
    touching = np.empty(n_pairs, dtype=np.bool_)
    count = np.empty(n)
    ax, ay, bx, by = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    by_mass = jammed
    for sweep in range(max_sweeps):
        if sweep == 0 or sweep == rule_sweeps:
            by_mass = jammed or sweep == rule_sweeps
            _fill_shares(la, lb, mass_a, mass_b, same_side, rank, by_mass, share_a, share_b)
        worst = -np.inf
        for p in range(n_pairs):
            dx = z[la[p]].real - z[lb[p]].real + tie[p].real
            dy = z[la[p]].imag - z[lb[p]].imag + tie[p].imag
            dist = norm(dx, dy)
            over = rsum[p] - dist
            worst = max(worst, over)
            touching[p] = over > 0.0
            f = over / max(dist, eps) if touching[p] else 0.0
            fx[p], fy[p] = f * dx, f * dy
        if worst <= tol:
            return
        count[:], ax[:], ay[:], bx[:], by[:] = 0.0, 0.0, 0.0, 0.0, 0.0
        for p in range(n_pairs):
            if touching[p]:
                count[la[p]] += share_a[p] > 0.0
                count[lb[p]] += share_b[p] > 0.0
            ax[la[p]] += fx[p] * share_a[p]
            ay[la[p]] += fy[p] * share_a[p]
            bx[lb[p]] += fx[p] * share_b[p]
            by[lb[p]] += fy[p] * share_b[p]
        stuck = False
        for i in range(n):
            gain = relax / max(count[i], 1.0)
            sx, sy = gain * (ax[i] - bx[i]), gain * (ay[i] - by[i])
            x, y = z[i].real, z[i].imag
            if walkable(padded, border, grid[i], x + sx, y + sy):
                z[i] = complex(x + sx, y + sy)
            elif sx != 0.0 or sy != 0.0:
                x, y, moved = slide(padded, border, grid[i], x, y, sx, sy)
                z[i] = complex(x, y)
                if not moved and rank[i] != R_FIXED:
                    rank[i] = R_FIXED
                    stuck = True
        if stuck:
            _fill_shares(la, lb, mass_a, mass_b, same_side, rank, by_mass, share_a, share_b)


@njit(cache=True)
def pair_gaps(z: np.ndarray, pair_a: np.ndarray, pair_b: np.ndarray, tie: np.ndarray,
              rsum: np.ndarray) -> np.ndarray:
    """Edge gap of every pair (pair_a[p], pair_b[p]) of units z: centre distance (with the
    pair's tie-break offset) minus the radius sum (-inf for a dead unit: +inf gap) -> [pairs]."""
    gap = np.empty(pair_a.size)
    for p in range(pair_a.size):
        a, b = pair_a[p], pair_b[p]
        gap[p] = norm(z[a].real - z[b].real + tie[p].real, z[a].imag - z[b].imag + tie[p].imag) - rsum[p]
    return gap


@njit(cache=True)
def _solve_round(z, watched, pair_a, pair_b, tie, rsum, mass, is_enemy, rank, grid, padded,
                 border, jammed, tol, eps, relax, max_sweeps, rule_sweeps) -> None:
    """solve_sweeps over the watched pairs (indices into the pair list), on the units of those
    pairs only (local indices, in unit order); z and rank (all units) change in place."""
    a, b = pair_a[watched], pair_b[watched]
    seen = np.zeros(z.size, dtype=np.bool_)
    seen[a] = True
    seen[b] = True
    units = np.nonzero(seen)[0]
    position = np.empty(z.size, dtype=np.int64)
    position[units] = np.arange(units.size)
    local_z, local_rank = z[units], rank[units]
    solve_sweeps(local_z, position[a], position[b], rsum[watched], tie[watched], mass[a], mass[b],
                 is_enemy[a] == is_enemy[b], local_rank, grid[units], padded, border, jammed, tol,
                 eps, relax, max_sweeps, rule_sweeps)
    z[units] = local_z
    rank[units] = local_rank


@njit(cache=True)
def separate(z: np.ndarray, moved: np.ndarray, pair_a: np.ndarray, pair_b: np.ndarray,
             tie: np.ndarray, rsum: np.ndarray, mass: np.ndarray, is_enemy: np.ndarray,
             rank: np.ndarray, grid: np.ndarray, padded: np.ndarray, border: int, tol: float,
             eps: float, relax: float, max_sweeps: int, rule_sweeps: int, rounds: int,
             margin: float) -> None:
    """The collision solver of one tick (engine._separate says what it does): z in place.

    moved: which units moved this tick [n] (only they can have run into another); pairs: the
    pairs that can collide, with their tie-break offsets and radius sums (-inf once dead);
    rank: pushing ranks [n] (not changed: units found stuck count as R_FIXED in a copy).
    Each round solves the pairs closer than margin * (round + 1) beyond contact, the first
    under the pushing rules, the later ones by mass."""
    gap = pair_gaps(z, pair_a, pair_b, tie, rsum)
    hit = False
    for p in range(gap.size):
        if gap[p] < -tol and (moved[pair_a[p]] or moved[pair_b[p]]):
            hit = True
            break
    if not hit:
        return
    rank = rank.copy()
    for rnd in range(rounds):
        if rnd > 0:
            gap = pair_gaps(z, pair_a, pair_b, tie, rsum)
            if gap.min() >= -tol:
                return
        watched = np.nonzero(gap < margin * (1 + rnd))[0]
        _solve_round(z, watched, pair_a, pair_b, tie, rsum, mass, is_enemy, rank, grid, padded,
                     border, rnd > 0, tol, eps, relax, max_sweeps, rule_sweeps)
