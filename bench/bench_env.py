"""Environment throughput of the built-in simulator, one process, random available actions.

Usage (from the repository root):
    python bench/bench_env.py [--maps 3m corridor 27m_vs_30m] [--steps 2000] [--seed 0]
    python bench/bench_env.py --smacv2 [--steps 2000]            # SMACv2's scenarios beside 3m, corridor
    python bench/bench_env.py --baseline 4f35566 [--repeats 3]   # ratio against another commit

--maps takes SMAC's maps and SMACv2's scenarios by name (protoss_5_vs_5 ... zerg_20_vs_23); a
scenario plays as scripts/fidelity.py plays it: SMACv2's capability wrapper with the env_args of
src/config/envs/smacv2_configs/<scenario>.yaml, each reset drawing new teams and start positions.
--smacv2 measures 3m and corridor, then 5_vs_5, 10_vs_10, 20_vs_20 and 20_vs_23 of each race.

Each step does what PyMARL2's episode runner asks of the env: get_state, get_avail_actions and
get_obs, then step. "runner steps/s" times all of it; "step() only" times env.step alone.
Episodes that end are reset (reset time counts towards runner steps/s).

--baseline REV measures the simulator of git revision REV (its src/ unpacked with git archive
into a temporary folder, run in a subprocess) in the same run, map by map and alternating with
this tree's, and prints both and their ratio. With --repeats R each map is measured R times on
each side, alternating, and the best figure of each side is kept (other processes on a shared
machine only ever slow a measurement down). A revision from before SMACv2's scenarios by name
(no src/envs/starcraft/interface/smacv2_configs.py) measures SMAC's maps only; the table says so.
"""
import argparse
import datetime
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from machine_info import describe_machine  # bench/ is on sys.path when a benchmark runs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MAPS = ("3m", "corridor", "27m_vs_30m")
SMACV2_PRESET = ("3m", "corridor") + tuple(f"{race}_{size}" for race in ("protoss", "terran", "zerg")
                                          for size in ("5_vs_5", "10_vs_10", "20_vs_20", "20_vs_23"))
# The module that plays SMACv2's scenarios by name, after and before the package's split into layers: a
# --baseline tree without it cannot measure them.
SCENARIO_MODULES = (os.path.join("envs", "starcraft", "interface", "smacv2_configs.py"),
                    os.path.join("envs", "starcraft", "smacv2_configs.py"))


def starcraft_module(name: str):
    """envs.starcraft's module `name` in the src/ first on sys.path: its path after the split into layers
    (game/, interface/), else the one before (a --baseline tree of an older revision)."""
    for path in (f"envs.starcraft.game.{name}", f"envs.starcraft.interface.{name}", f"envs.starcraft.{name}"):
        try:
            return importlib.import_module(path)
        except ModuleNotFoundError:
            continue
    raise ModuleNotFoundError(f"envs.starcraft has no module {name!r}")


def random_actions(env, rng: np.random.Generator) -> list[int]:
    """One uniformly random available action per agent: the largest of uniform draws over the
    available actions (one vectorised draw, so that the policy costs the measurement little)."""
    avail = np.asarray(env.get_avail_actions())  # [n_agents, n_actions]
    return (rng.random(avail.shape) * avail).argmax(axis=1).tolist()


def make_env(map_name: str, seed: int):
    """The built-in simulator's env for a SMAC map or a SMACv2 scenario (its file's env_args), from
    the src/ first on sys.path."""
    from envs.starcraft import REGISTRY, StarCraft2Env  # (the package's names in every revision)

    if map_name in REGISTRY:
        return StarCraft2Env(map_name=map_name, seed=seed, backend="builtin")
    return starcraft_module("smacv2_configs").scenario_env(map_name, seed=seed, backend="builtin")


def bench_map(map_name: str, steps: int, seed: int) -> dict[str, float]:
    """Run `steps` env steps on one map; returns the counts and both throughputs."""
    env = make_env(map_name, seed)
    rng = np.random.default_rng(seed)
    env.reset()
    episodes, step_seconds = 0, 0.0
    start = time.perf_counter()
    for _ in range(steps):
        env.get_state()
        env.get_obs()
        actions = random_actions(env, rng)
        step_start = time.perf_counter()
        _, terminated, _ = env.step(actions)
        step_seconds += time.perf_counter() - step_start
        if terminated:
            episodes += 1
            env.reset()
    total_seconds = time.perf_counter() - start
    env.close()
    return {"episodes": episodes, "seconds": total_seconds,
            "runner_sps": steps / total_seconds, "step_sps": steps / step_seconds}


def unpack_src(rev: str) -> str:
    """src/ of git revision rev, unpacked into a temporary folder -> that folder's src path."""
    folder = tempfile.mkdtemp(prefix="bench_env_")
    archive = subprocess.run(["git", "archive", rev, "src"], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)
    return os.path.join(folder, "src")


def _bench_other(src: str, map_name: str, steps: int, seed: int) -> dict[str, float]:
    """bench_map on another src/ tree, in a subprocess."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--src", src, "--json",
                          "--maps", map_name, "--steps", str(steps), "--seed", str(seed)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])[map_name]


def _best(a: dict | None, b: dict) -> dict:
    return b if a is None or b["step_sps"] > a["step_sps"] else a


def unknown_maps(maps: list[str]) -> list[str]:
    """The names in `maps` that are neither a SMAC map nor a SMACv2 scenario of this tree."""
    maps_module = starcraft_module("maps")
    return [m for m in maps if m not in maps_module.MAP_REGISTRY and m not in maps_module.SMACV2_SCENARIOS]


def baseline_lacks_smacv2(other: str | None, maps: list[str]) -> list[str]:
    """The SMACv2 scenarios among `maps` that the baseline src/ tree `other` cannot play."""
    if other is None or any(os.path.exists(os.path.join(other, module)) for module in SCENARIO_MODULES):
        return []
    return [m for m in maps if m in starcraft_module("maps").SMACV2_SCENARIOS]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument("--maps", nargs="+", default=list(DEFAULT_MAPS), help="SMAC maps or SMACv2 scenarios")
    chosen.add_argument("--smacv2", action="store_const", dest="maps", const=list(SMACV2_PRESET),
                        help="3m, corridor, then 5_vs_5, 10_vs_10, 20_vs_20 and 20_vs_23 of each race")
    parser.add_argument("--steps", type=int, default=2000, help="env steps per map")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--baseline", metavar="REV", help="also measure git revision REV's simulator")
    parser.add_argument("--repeats", type=int, default=1, help="measurements per map and side (best kept)")
    parser.add_argument("--src", help=argparse.SUPPRESS)     # internal: measure this src/ tree
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.steps < 1 or args.repeats < 1:
        parser.error("--steps and --repeats must be positive")
    sys.path.insert(0, args.src or os.path.join(ROOT, "src"))
    if args.json:
        print(json.dumps({m: bench_map(m, args.steps, args.seed) for m in args.maps}))
        return
    unknown = unknown_maps(args.maps)
    if unknown:
        parser.error(f"unknown maps {unknown}: give SMAC maps or SMACv2 scenarios (protoss_5_vs_5 ... zerg_20_vs_23)")

    command = f"python bench/bench_env.py --maps {' '.join(args.maps)} --steps {args.steps} --seed {args.seed}"
    if args.baseline:
        command += f" --baseline {args.baseline}"
    if args.repeats > 1:
        command += f" --repeats {args.repeats}"
    print(f"command: {command}")
    print(f"machine: {describe_machine()}")
    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}")
    other = unpack_src(args.baseline) if args.baseline else None
    not_in_baseline = baseline_lacks_smacv2(other, args.maps)
    if not_in_baseline:
        print(f"baseline {args.baseline} predates SMACv2's scenarios by name (no {' or '.join(SCENARIO_MODULES)}): "
              f"{', '.join(not_in_baseline)} measured on this tree only")
    header = f"{'map':<18}{'steps':>7}{'episodes':>10}{'seconds':>9}{'runner steps/s':>16}{'step() only':>13}"
    if other:
        header += f"{'baseline runner':>17}{'baseline step()':>17}{'ratio runner':>14}{'ratio step()':>14}"
    print(header)
    for map_name in args.maps:
        mine = base = None
        for _ in range(args.repeats):
            if other and map_name not in not_in_baseline:
                base = _best(base, _bench_other(other, map_name, args.steps, args.seed))
            mine = _best(mine, bench_map(map_name, args.steps, args.seed))
        print(table_line(map_name, args.steps, mine, base, bool(other)), flush=True)


def table_line(map_name: str, steps: int, mine: dict, base: dict | None, with_baseline: bool) -> str:
    """One map's row: this tree's figures, then (with_baseline) the baseline's and the ratios, '-'
    where the baseline could not play the map."""
    line = (f"{map_name:<18}{steps:>7}{mine['episodes']:>10}{mine['seconds']:>9.2f}"
            f"{mine['runner_sps']:>16.1f}{mine['step_sps']:>13.1f}")
    if base:
        line += (f"{base['runner_sps']:>17.1f}{base['step_sps']:>17.1f}"
                 f"{mine['runner_sps'] / base['runner_sps']:>14.2f}{mine['step_sps'] / base['step_sps']:>14.2f}")
    elif with_baseline:
        line += f"{'-':>17}{'-':>17}{'-':>14}{'-':>14}"
    return line


if __name__ == "__main__":
    main()
