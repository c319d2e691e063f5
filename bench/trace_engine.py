"""Whether two versions of the built-in simulator play the same battles, bit for bit.

Usage (from the repository root):
    python bench/trace_engine.py --baseline REV [--maps 3m corridor ...] [--steps 400] [--seed 1]

Plays every map (a SMAC map, or a SMACv2 scenario by name such as protoss_5_vs_5) with a uniformly
random policy and with SMAC's heuristic (env_args heuristic_ai=True) on this tree and on git revision
REV (its src/ unpacked with git archive, run in a subprocess), recording after every env step each
unit's position, health, shield, weapon cooldown and target, and compares the two records exactly.
Prints, per map and policy, "identical" or the first step at which they differ and by how much. Exits
with status 1 when any trajectory differs. For a change meant to be a pure speed-up: the fidelity
figures of REV then hold for this tree too.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

from bench_env import ROOT, random_actions, starcraft_module, unpack_src

DEFAULT_MAPS = ("3m", "corridor", "so_many_baneling", "2c_vs_64zg", "27m_vs_30m", "2s3z", "MMM2",
                "bane_vs_bane", "6h_vs_8z", "3s5z_vs_3s6z")
POLICIES = ("random", "heuristic")


def trajectory(map_name: str, policy: str, steps: int, seed: int) -> np.ndarray:
    """The units' state after each of `steps` env steps on a SMAC map or a SMACv2 scenario (episodes that end
    are reset)
    -> float [steps, 6 * units]: x, y, health, shield, weapon cooldown, target."""
    from envs.starcraft import REGISTRY, StarCraft2Env  # from the src/ first on sys.path (names of every revision)

    settings = dict(seed=seed, backend="builtin", heuristic_ai=policy == "heuristic")
    if map_name in REGISTRY:
        env = StarCraft2Env(map_name=map_name, **settings)
    else:  # a SMACv2 scenario by name (its file's env_args)
        env = starcraft_module("smacv2_configs").scenario_env(map_name, **settings)
    rng = np.random.default_rng(seed)
    env.reset()
    rows = []
    for _ in range(steps):
        actions = [0] * env.n_agents if policy == "heuristic" else random_actions(env, rng)
        _, terminated, _ = env.step(actions)
        engine, units = env._engine, env._engine.units
        rows.append(np.concatenate([units.x, units.y, units.health, units.shield,
                                    units.weapon_cooldown, engine._target.astype(np.float64)]))
        if terminated:
            env.reset()
    env.close()
    return np.array(rows)


def record(maps: list[str], steps: int, seed: int) -> dict[str, np.ndarray]:
    return {f"{m}/{p}": trajectory(m, p, steps, seed) for m in maps for p in POLICIES}


def _record_other(src: str, maps: list[str], steps: int, seed: int) -> dict[str, np.ndarray]:
    """record() on another src/ tree, in a subprocess."""
    with tempfile.TemporaryDirectory(prefix="trace_engine_") as folder:
        out = os.path.join(folder, "trace.npz")
        subprocess.run([sys.executable, os.path.abspath(__file__), "--src", src, "--out", out,
                        "--maps", *maps, "--steps", str(steps), "--seed", str(seed)], check=True)
        with np.load(out) as saved:
            return {key: saved[key] for key in saved.files}


def first_difference(a: np.ndarray, b: np.ndarray) -> str:
    """'identical', or the first differing step and the largest difference there."""
    if a.shape != b.shape:
        return f"differ: shapes {a.shape} and {b.shape} (another unit count?)"
    rows = np.flatnonzero(~np.all((a == b) | (np.isnan(a) & np.isnan(b)), axis=1))
    if rows.size == 0:
        return "identical"
    step = int(rows[0])
    return f"differ from step {step + 1} (largest difference there {np.nanmax(np.abs(a[step] - b[step])):.3g})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", metavar="REV", help="git revision to compare this tree with")
    parser.add_argument("--maps", nargs="+", default=list(DEFAULT_MAPS),
                        help="SMAC maps or SMACv2 scenarios (protoss_5_vs_5, zerg_10_vs_11, ...); "
                             f"default: {' '.join(DEFAULT_MAPS)}")
    parser.add_argument("--steps", type=int, default=400, help="env steps per map and policy")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--src", help=argparse.SUPPRESS)  # internal: record this src/ tree
    parser.add_argument("--out", help=argparse.SUPPRESS)  # internal: into this file
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be positive")
    sys.path.insert(0, args.src or os.path.join(ROOT, "src"))
    if args.out:
        np.savez(args.out, **record(args.maps, args.steps, args.seed))
        return 0
    if not args.baseline:
        parser.error("--baseline REV is required")
    theirs = _record_other(unpack_src(args.baseline), args.maps, args.steps, args.seed)
    mine = record(args.maps, args.steps, args.seed)
    print(f"command: python bench/trace_engine.py --baseline {args.baseline} --maps {' '.join(args.maps)} "
          f"--steps {args.steps} --seed {args.seed}")
    verdicts = {key: first_difference(mine[key], theirs[key]) for key in mine}
    for key, verdict in verdicts.items():
        print(f"{key:<28}{verdict}")
    same = all(v == "identical" for v in verdicts.values())
    print("all identical" if same else "some trajectories differ")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
