"""Fidelity report of the built-in simulator: win rates of non-learning policies per SMAC map and SMACv2 scenario.

Usage (from the repository root):
    python scripts/fidelity.py [--maps 2s3z 3s5z ...] [--seeds 5] [--episodes 100]
                               [--policies heuristic random stop] [--jobs 2] [--save part.json]
    python scripts/fidelity.py --smacv2 [...]                      # SMACv2's 15 scenarios
    python scripts/fidelity.py --load part1.json part2.json ...   # one table from saved parts

--maps takes SMAC's maps and SMACv2's scenarios by name (protoss_5_vs_5 ... zerg_20_vs_23);
--smacv2 plays the 15 scenarios, race by race in the order 5_vs_5, 10_vs_10, 20_vs_20, 10_vs_11,
20_vs_23. A scenario plays as `--env-config=sc2v2 with env_args.map_name=<scenario>` does: SMACv2's
capability wrapper with the env_args of src/config/envs/smacv2_configs/<scenario>.yaml, each reset
drawing its teams and start positions from the env seed.

A long report can be played in parts (say one per group of maps, each a separate command
that fits a time budget) with --save, and printed as one table with --load.

Policies:
  heuristic  SMAC's own scripted focus fire (env_args heuristic_ai=True: every agent attacks
             the nearest enemy and keeps it until it dies; a Medivac heals the nearest damaged ally);
             on SMACv2's scenarios SMACv2's heuristic (the same, but a Marauder never picks a Medivac)
  random     a uniformly random available action per agent and step
  stop       "stop" for every living agent (the agents never fight back)
  choke      corridor only: a scripted use of the terrain. The zealots walk (with SMAC's move
             actions) into the corner where the open area meets the 2x2 choke and pack there,
             so that zerglings can reach them from one side only; each attacks the nearest
             zergling within 1.5, else walks back to its place, else stops. (SMAC's move
             actions cannot take a unit into the choke itself: the cells they probe beside its
             diagonal ends are blocked.)

Every cell plays `--seeds` env seeds x `--episodes` episodes (env seed s = --first-seed + i;
the random policy draws its actions from its own generator seeded the same way). The win rate
is printed in percent with its binomial standard error over all episodes of the cell,
sqrt(p (1 - p) / N). The "paper" column is the Heuristic column of the SMAC paper's results
table (Samvelyan et al. 2019, arXiv:1902.04043), played on StarCraft II 4.6.2; the last
columns give the heuristic's gap to it. SMACv2 publishes no such table: its scenarios show '-'.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
sys.path.insert(0, SRC)

from envs.starcraft.interface.backend import (  # noqa: E402  (needs src/ on sys.path)
    BUILTIN_SOURCES, builtin_sources_digest)
from envs.starcraft.game.maps import MAP_REGISTRY, SMACV2_SCENARIOS  # noqa: E402

# Heuristic column of the SMAC paper's results table (win %, StarCraft II 4.6.2).
PAPER_HEURISTIC = {
    "2s_vs_1sc": 0, "2s3z": 90, "3s5z": 42, "1c3s5z": 81, "10m_vs_11m": 12,
    "2c_vs_64zg": 0, "bane_vs_bane": 43, "5m_vs_6m": 0, "3s_vs_5z": 0,
    "3s5z_vs_3s6z": 0, "6h_vs_8z": 0, "27m_vs_30m": 0, "MMM2": 0, "corridor": 0,
}
PAPER_MAPS = tuple(PAPER_HEURISTIC)
OTHER_MAPS = tuple(m for m in MAP_REGISTRY if m not in PAPER_HEURISTIC)
SMACV2_MAPS = tuple(SMACV2_SCENARIOS)  # race by race: 5_vs_5, 10_vs_10, 20_vs_20, 10_vs_11, 20_vs_23
REPORT_ORDER = PAPER_MAPS + OTHER_MAPS + SMACV2_MAPS
# What the measured battles depend on beside the simulator's sources: the scenarios' env_args.
ENGINE_PATHS = ("src/envs/starcraft", "src/config/envs/smacv2_configs")
POLICIES = ("heuristic", "random", "stop")
EXTRA_POLICIES = ("choke",)
# corridor: the corner of the open area at the choke, six places packed into it.
CHOKE_HOLD = ((14.5, 14.5), (15.5, 14.5), (14.5, 15.5), (16.5, 14.5), (15.5, 15.5), (14.5, 16.5))


def engine_id() -> str:
    """Which simulator was measured: git commit (+ dirty flag) and the digest of its sources."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                                capture_output=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", *ENGINE_PATHS],
                               cwd=ROOT, text=True, capture_output=True, check=True).stdout.strip()
        commit += " + uncommitted engine changes" if dirty else ""
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown commit"
    return (f"BuiltinEngine, git {commit}, sources sha256 {builtin_sources_digest()} "
            f"({', '.join(BUILTIN_SOURCES)})")


def choke_actions(env, places: dict[int, tuple[float, float]]) -> list[int]:
    """The "choke" policy's actions (see the module docstring)."""
    actions = []
    for a in range(env.n_agents):
        unit = env.get_unit_by_id(a)
        if unit.health <= 0:
            actions.append(0)
            continue
        avail = env.get_avail_agent_actions(a)
        x, y = unit.pos.x, unit.pos.y
        near = [(np.hypot(env.enemies[e].pos.x - x, env.enemies[e].pos.y - y), e)
                for e in range(env.n_enemies) if env.enemies[e].health > 0 and avail[6 + e]]
        near = [(d, e) for d, e in near if d < 1.5]
        if near:
            actions.append(6 + min(near)[1])
            continue
        dx, dy = places[a][0] - x, places[a][1] - y
        if abs(dx) < 0.4 and abs(dy) < 0.4:
            actions.append(1)
            continue
        horizontal, vertical = (4 if dx > 0 else 5), (2 if dy > 0 else 3)
        order = (horizontal, vertical) if abs(dx) > abs(dy) else (vertical, horizontal)
        actions.append(next((m for m in order if avail[m]), 1))
    return actions


def make_env(map_name: str, seed: int, heuristic_ai: bool):
    """The built-in simulator's env for a SMAC map (StarCraft2Env) or a SMACv2 scenario (SMACv2's
    capability wrapper with the scenario's env_args), seeded with `seed`."""
    if map_name in SMACV2_SCENARIOS:
        from envs.starcraft.interface.smacv2_configs import scenario_env

        return scenario_env(map_name, seed=seed, backend="builtin", heuristic_ai=heuristic_ai)
    from envs.starcraft.interface.starcraft2 import StarCraft2Env

    return StarCraft2Env(map_name=map_name, seed=seed, backend="builtin", heuristic_ai=heuristic_ai)


def play(map_name: str, policy: str, seed: int, episodes: int) -> tuple[int, int, int]:
    """Play `episodes` episodes of one policy with one env seed -> (wins, episodes, env steps)."""
    env = make_env(map_name, seed, heuristic_ai=(policy == "heuristic"))
    rng = np.random.default_rng(seed)
    wins = steps = 0
    n = env.n_agents
    for _ in range(episodes):
        env.reset()
        terminated, info = False, {}
        if policy == "choke":  # the nearest zealot takes the corner place, and so on
            by_distance = sorted(range(n), key=lambda a: np.hypot(env.get_unit_by_id(a).pos.x - 14.5,
                                                                  env.get_unit_by_id(a).pos.y - 14.5))
            places = {a: CHOKE_HOLD[k] for k, a in enumerate(by_distance)}
        while not terminated:
            if policy == "choke":
                actions = choke_actions(env, places)
            elif policy == "heuristic":
                actions = [0] * n  # replaced by the env's heuristic
            else:
                avail = np.asarray(env.get_avail_actions())  # [n_agents, n_actions]
                if policy == "random":
                    actions = [int(rng.choice(np.flatnonzero(row))) for row in avail]
                else:
                    actions = [1 if row[1] else 0 for row in avail]
            _, terminated, info = env.step(actions)
            steps += 1
        wins += bool(info.get("battle_won", False))
    env.close()
    return wins, episodes, steps


def _play_job(job):
    return job, play(*job)


def percent(wins: int, total: int) -> tuple[float, float]:
    p = wins / total
    return 100.0 * p, 100.0 * (p * (1.0 - p) / total) ** 0.5


def print_table(results: dict, maps: list[str], policies: list[str]) -> dict:
    """The report table from {(map, policy): [wins, episodes, steps]} -> {(map, policy): (%, se)}."""
    header = f"{'map':<17}{'paper':>6}"
    for p in policies:
        header += f"{p + ' %':>15}"
    if "heuristic" in policies:
        header += f"{'gap':>6}"
    print(header)
    gaps = []
    table = {}
    for m in maps:
        paper = PAPER_HEURISTIC.get(m)
        line = f"{m:<17}{'-' if paper is None else paper:>6}"
        for p in policies:
            w, e, _ = results[(m, p)]
            pct, se = percent(w, e)
            table[(m, p)] = (pct, se)
            line += f"{pct:>9.1f} ±{se:>4.1f}"
        if "heuristic" in policies:
            if paper is None:
                line += f"{'':>6}"
            else:
                gap = table[(m, "heuristic")][0] - paper
                gaps.append(abs(gap))
                line += f"{gap:>+6.0f}"
        print(line)
    if gaps:
        within = sum(g <= 15 for g in gaps)
        print(f"heuristic vs paper: mean |gap| {np.mean(gaps):.1f} points, max {max(gaps):.1f}, "
              f"{within}/{len(gaps)} maps within 15 points")
    return table


def load_parts(paths: list[str]) -> None:
    """Print one table from parts saved with --save (their headers first)."""
    results: dict[tuple[str, str], list[int]] = {}
    maps: list[str] = []
    policies: list[str] = []
    for path in paths:
        with open(path) as f:
            part = json.load(f)
        print(f"part {path}: {part['command']} | {part['engine']} | {part['machine']} | "
              f"{part['date']} | {part['seconds']:.0f} s")
        for m, p, w, e, st in part["cells"]:
            results[(m, p)] = [w, e, st]
            if m not in maps:
                maps.append(m)
            if p not in policies:
                policies.append(p)
    order = [m for m in REPORT_ORDER if m in maps]
    missing = [(m, p) for m in order for p in policies if (m, p) not in results]
    if missing:
        raise SystemExit(f"the parts lack cells {missing}")
    print_table(results, order, policies)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument("--maps", nargs="+", default=list(PAPER_MAPS + OTHER_MAPS),
                        help="SMAC maps or SMACv2 scenarios; default: the 14 maps of the SMAC paper's table, "
                             "then the other 9")
    chosen.add_argument("--smacv2", action="store_const", dest="maps", const=list(SMACV2_MAPS),
                        help="SMACv2's 15 scenarios, race by race (5_vs_5, 10_vs_10, 20_vs_20, 10_vs_11, 20_vs_23)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--episodes", type=int, default=100, help="episodes per seed")
    parser.add_argument("--policies", nargs="+", default=list(POLICIES), choices=POLICIES + EXTRA_POLICIES)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--save", metavar="PATH", help="also write the cells to this JSON file")
    parser.add_argument("--load", nargs="+", metavar="PATH",
                        help="print one table from JSON parts written by --save; plays nothing")
    args = parser.parse_args(argv)
    if args.load:
        load_parts(args.load)
        return {}
    unknown = [m for m in args.maps if m not in REPORT_ORDER]
    if unknown:
        parser.error(f"unknown maps {unknown}; known: {', '.join(MAP_REGISTRY)} (SMAC) and "
                     f"{', '.join(SMACV2_MAPS)} (SMACv2)")
    if args.seeds < 1 or args.episodes < 1 or args.jobs < 1:
        parser.error("--seeds, --episodes and --jobs must be positive")
    if "choke" in args.policies and args.maps != ["corridor"]:
        parser.error("the choke policy is for --maps corridor only")

    command = "python scripts/fidelity.py " + " ".join(sys.argv[1:] if argv is None else argv)
    engine = engine_id()
    machine = (f"{platform.platform()}, {platform.processor() or platform.machine()}, "
               f"{os.cpu_count()} CPUs, Python {platform.python_version()}")
    date = f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}"
    print(f"command: {command}")
    print(f"engine: {engine}")
    print(f"machine: {machine}")
    print(f"date: {date}")
    print(f"cells: {args.seeds} seeds x {args.episodes} episodes; win % +- binomial standard error",
          flush=True)

    seeds = range(args.first_seed, args.first_seed + args.seeds)
    jobs = [(m, p, s, args.episodes) for m in args.maps for p in args.policies for s in seeds]
    results: dict[tuple[str, str], list[int]] = {}
    start = time.perf_counter()
    if args.jobs == 1:
        done = map(_play_job, jobs)
    else:
        pool = ProcessPoolExecutor(args.jobs)
        done = pool.map(_play_job, jobs)
    for (m, p, _, _), (w, e, st) in done:
        cell = results.setdefault((m, p), [0, 0, 0])
        cell[0] += w
        cell[1] += e
        cell[2] += st
    if args.jobs > 1:
        pool.shutdown()
    elapsed = time.perf_counter() - start

    table = print_table(results, args.maps, args.policies)
    total_steps = sum(c[2] for c in results.values())
    print(f"{total_steps} env steps in {elapsed:.0f} s ({args.jobs} jobs)")
    if args.save:
        with open(args.save, "w") as f:
            json.dump({"command": command, "engine": engine, "machine": machine, "date": date,
                       "seconds": elapsed,
                       "cells": [[m, p, *results[(m, p)]] for m in args.maps for p in args.policies]},
                      f, indent=1)
    return table


if __name__ == "__main__":
    main()
