"""Write a replay of scripted battles on the built-in simulator: a focus-fire policy plays a SMAC map or a
SMACv2 map or scenario (each episode draws its armies as the scenario's config says), and the recorder of
interface/replay.py writes the episodes as one animated GIF.

Run from src/:
    python -m envs.starcraft.render --map 3m --episodes 1 --out replay.gif
    python -m envs.starcraft.render --map protoss_5_vs_5 --episodes 3 --out replay.gif
"""
import argparse
from typing import Any

import numpy as np

from .game.engine import BuiltinEngine
from .game.maps import SMACV2_SCENARIOS, gen_map_of
from .game.scenarios import MAP_NAMES
from .interface.replay import RecordingEngine
from .interface.smacv2_configs import scenario_env
from .interface.starcraft2 import StarCraft2Env

# SMAC action numbers (facts sheet §3); SMACv2 numbers them alike, its field-of-view turns (EPO)
# and then its targets following, from env.n_actions_no_attack.
_STOP, _NORTH, _SOUTH, _EAST, _WEST = 1, 2, 3, 4, 5


def _move_towards(avail: np.ndarray, dx: float, dy: float) -> int:
    """The available move that best closes (dx, dy): dominant axis first, else stop."""
    along_x = _EAST if dx > 0 else _WEST
    along_y = _NORTH if dy > 0 else _SOUTH
    for action in ((along_x, along_y) if abs(dx) > abs(dy) else (along_y, along_x)):
        if avail[action]:
            return action
    return _STOP


def focus_fire_actions(env: Any) -> list[int]:
    """Every agent shoots the weakest enemy in reach of the team, else walks to the nearest one.

    A Medivac (MMM maps, SMACv2's Terran maps) heals the most hurt ally in reach, else follows
    the army. Reads the SMAC env's `agents`/`enemies` views and available actions only.
    """
    avail = np.array(env.get_avail_actions(), dtype=bool)  # [n_agents, n_actions]
    first = env.n_actions_no_attack
    agents, enemies = env.agents, env.enemies
    # medivac_id is 0 (no unit's type) on maps without Medivacs
    is_medivac = np.array([agents[a].unit_type == env.medivac_id for a in range(env.n_agents)])
    enemy_hp = np.array([enemies[e].health + enemies[e].shield for e in range(env.n_enemies)])
    # [n_enemies] attackable by some fighter (a Medivac's targets are allies)
    in_reach = avail[~is_medivac, first:first + env.n_enemies].any(axis=0)
    focus = int(np.argmin(np.where(in_reach, enemy_hp, np.inf))) if in_reach.any() else None
    actions = []
    for a_id in range(env.n_agents):
        me = agents[a_id]
        if me.health <= 0:
            actions.append(0)
        elif is_medivac[a_id]:
            actions.append(_medivac_action(env, avail[a_id], me))
        else:
            targets = avail[a_id, first:first + env.n_enemies]  # [n_enemies]
            actions.append(_fighter_action(avail[a_id], targets, first, me, enemies, enemy_hp, focus))
    return actions


def _fighter_action(avail: np.ndarray, targets: np.ndarray, first: int, me: Any, enemies: dict,
                    enemy_hp: np.ndarray, focus: int | None) -> int:
    if focus is not None and targets[focus]:
        return first + focus
    if targets.any():
        return first + int(np.argmin(np.where(targets, enemy_hp, np.inf)))
    alive = [e for e in enemies.values() if e.health > 0]
    if not alive:
        return _STOP
    nearest = min(alive, key=lambda e: (e.pos.x - me.pos.x) ** 2 + (e.pos.y - me.pos.y) ** 2)
    return _move_towards(avail, nearest.pos.x - me.pos.x, nearest.pos.y - me.pos.y)


def _medivac_action(env: Any, avail: np.ndarray, me: Any) -> int:
    agents, first = env.agents, env.n_actions_no_attack
    hurt = [(agents[j].health / agents[j].health_max, j) for j in range(env.n_agents)
            if avail[first + j] and agents[j].health < agents[j].health_max]
    if hurt:
        return first + min(hurt)[1]
    army = [u for u in agents.values() if u.health > 0 and u.unit_type != env.medivac_id]
    if not army:
        return _STOP
    cx = float(np.mean([u.pos.x for u in army]))
    cy = float(np.mean([u.pos.y for u in army]))
    return _move_towards(avail, cx - me.pos.x, cy - me.pos.y)


def engine_map_of(map_name: str) -> str:
    """The map the built-in engine plays for `map_name`: a SMACv2 scenario's 10gen map, else itself;
    ValueError listing the playable names for any other."""
    if map_name in SMACV2_SCENARIOS:
        return gen_map_of(map_name)
    if map_name not in MAP_NAMES:
        raise ValueError(f"unknown map {map_name!r}; SMAC's maps: {', '.join(MAP_NAMES)}; "
                         f"SMACv2's scenarios: {', '.join(SMACV2_SCENARIOS)}")
    return map_name


def record_battles(map_name: str, episodes: int, seed: int | None) -> tuple[RecordingEngine, dict]:
    """Play `episodes` focus-fire episodes on the built-in engine; returns (engine, env stats).

    map_name: a SMAC map, or a SMACv2 scenario (protoss_5_vs_5, ...) played with the env_args of
    its config file, each episode drawing new armies.
    """
    engine = RecordingEngine(BuiltinEngine(engine_map_of(map_name), seed), map_name,
                             max_episodes=episodes)
    if map_name in SMACV2_SCENARIOS:
        env = scenario_env(map_name, seed=seed, engine=engine)
    else:
        env = StarCraft2Env(map_name=map_name, seed=seed, engine=engine)
    for _ in range(episodes):
        env.reset()
        terminated = False
        while not terminated:
            _, terminated, _ = env.step(focus_fire_actions(env))
    stats = env.get_stats()
    env.close()
    return engine, stats


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write a GIF replay of scripted focus-fire "
                                                 "battles on the built-in StarCraft II simulator.")
    parser.add_argument("--map", default="3m",
                        help="SMAC map (3m, MMM2, ...) or SMACv2 scenario (protoss_5_vs_5, ...)")
    parser.add_argument("--episodes", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="replay.gif", help="GIF file to write")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error(f"--episodes must be positive, got {args.episodes}")
    try:
        engine_map_of(args.map)
    except ValueError as error:
        parser.error(str(error))
    engine, stats = record_battles(args.map, args.episodes, args.seed)
    n_frames = engine.recorder.save(args.out)
    print(f"{args.map}: {args.episodes} episode(s), won {stats['battles_won']}, "
          f"{n_frames} frames -> {args.out}")


if __name__ == "__main__":
    main()
