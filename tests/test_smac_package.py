"""The simulator for other code (pyproject.toml: the package `marlkit` is src/envs): SMAC's API in envs.smac
(marlkit.smac), SMAC's PettingZoo interface (marlkit.smac_pettingzoo) under PettingZoo's own API test, bad
input as exceptions, and (slow) a fresh virtual environment outside the repository that installs the package
without torch and plays 3m, 2c_vs_64zg and corridor step for step as the env marlkit trains on."""
import inspect
import json
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

import main
from envs import smac, smac_pettingzoo
from envs.starcraft.interface.smacv2_configs import read_config_file, scenario_config_path
from envs.starcraft.interface.starcraft2 import StarCraft2Env as TrainedEnv

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# smac.env.StarCraft2Env's constructor (oxwhirl/smac): every argument and its default.
SMAC_ARGUMENTS = {
    "map_name": "8m", "step_mul": 8, "move_amount": 2, "difficulty": "7", "game_version": None, "seed": None,
    "continuing_episode": False, "obs_all_health": True, "obs_own_health": True, "obs_last_action": False,
    "obs_pathing_grid": False, "obs_terrain_height": False, "obs_instead_of_state": False,
    "obs_timestep_number": False, "state_last_action": True, "state_timestep_number": False,
    "reward_sparse": False, "reward_only_positive": True, "reward_death_value": 10, "reward_win": 200,
    "reward_defeat": 0, "reward_negative_scale": 0.5, "reward_scale": True, "reward_scale_rate": 20,
    "replay_dir": "", "replay_prefix": "", "window_size_x": 1920, "window_size_y": 1200, "heuristic_ai": False,
    "heuristic_rest": False, "debug": False}
SMAC_ENV_INFO_KEYS = {"state_shape", "obs_shape", "n_actions", "n_agents", "episode_limit"}
MAPS = ("3m", "2c_vs_64zg", "corridor")
PROTOSS_5V5 = read_config_file(scenario_config_path("protoss_5_vs_5", main.CONFIG_DIR))["env_args"]["capability_config"]


def test_the_package_env_is_the_env_marlkit_trains_on_with_smacs_constructor():
    assert smac.StarCraft2Env is TrainedEnv
    parameters = inspect.signature(smac.StarCraft2Env).parameters
    assert {name: parameters[name].default for name in SMAC_ARGUMENTS} == SMAC_ARGUMENTS
    env = smac.StarCraft2Env(map_name="3m", seed=1, backend="builtin", game_version="4.10", window_size_x=640,
                             replay_dir="/tmp/unused")  # game-only arguments are accepted
    assert SMAC_ENV_INFO_KEYS <= set(env.get_env_info())
    observations, state = env.reset()
    assert isinstance(observations, list) and observations[0].dtype == np.float32 and state.ndim == 1
    reward, terminated, info = env.step([1] * env.n_agents)
    assert isinstance(reward, float) and isinstance(terminated, bool) and isinstance(info, dict)
    with pytest.raises(ZeroDivisionError):  # as SMAC's: no win rate before the first finished episode
        env.get_stats()
    env.close()
    assert smac.get_map_params("corridor") == {"n_agents": 6, "n_enemies": 24, "limit": 400, "a_race": "P",
                                               "b_race": "Z", "unit_type_bits": 0, "map_type": "zealots"}


@pytest.mark.parametrize("make, error, message", [
    (lambda: smac.StarCraft2Env(map_name="3mm"), ValueError, "unknown map '3mm'; known maps: 3m, 8m"),
    (lambda: smac.StarCraft2Env(map_name="3m", obs_everything=True), TypeError, "unexpected keyword argument"),
    (lambda: smac.get_map_params("nope"), ValueError, "unknown map 'nope'"),
])
def test_bad_arguments_raise_one_line(make, error, message):
    with pytest.raises(error, match=message) as raised:
        make()
    assert "\n" not in str(raised.value)


def test_bad_actions_raise_one_line():
    env = smac.StarCraft2Env(map_name="3m", seed=0, backend="builtin")
    env.reset()
    with pytest.raises(ValueError, match=r"got 2 actions; 3m needs one per agent \(3\)") as wrong_length:
        env.step([1, 1])
    with pytest.raises(AssertionError, match="Agent 0 cannot perform action 0") as unavailable:  # SMAC's error
        env.step([0] * env.n_agents)  # the no-op is unavailable to a living unit
    for error in (wrong_length, unavailable):
        assert "\n" not in str(error.value)
    env.close()


@pytest.mark.parametrize("call", ["get_obs", "get_state", "get_avail_actions", "get_state_dict"])
def test_reading_before_reset_says_to_reset_first(call):
    env = smac.StarCraft2Env(map_name="3m", seed=0, backend="builtin")
    with pytest.raises(RuntimeError, match=rf"^{call}\(\) before reset\(\): call reset\(\) to start an episode first$"):
        getattr(env, call)()
    with pytest.raises(RuntimeError, match=r"^step\(\) before reset\(\)"):
        env.step([1, 1, 1])
    env.close()


@pytest.mark.parametrize("actions, message", [
    ([1.7, 1, 1], r"step\(\) takes whole-number actions; got \[1.7, 1.0, 1.0\]"),
    (["1", 1, 1], r"step\(\) takes whole-number actions"),
    ([None, 1, 1], r"step\(\) takes whole-number actions"),
    ([True, True, True], r"step\(\) takes whole-number actions"),
    (np.ones((3, 1), int), r"step\(\) takes a flat sequence of one action per agent \(3 on 3m\); got an array of "
                           r"shape \(3, 1\)"),
    ([[1, 1, 1]], r"got an array of shape \(1, 3\)"),
])
def test_actions_that_are_not_one_whole_number_per_agent_are_refused(actions, message):
    env = smac.StarCraft2Env(map_name="3m", seed=0, backend="builtin")
    env.reset()
    with pytest.raises(ValueError, match=message):
        env.step(actions)
    env.step(np.array([1.0, 1.0, 1.0]))  # whole numbers of any numeric type play, as SMAC's int() reads them
    env.close()


def test_stepping_after_the_episode_ended_is_refused_and_counts_no_battle():
    env = smac.StarCraft2Env(map_name="3m", seed=0, backend="builtin")
    env.reset()
    terminated, steps = False, 0
    while not terminated:  # every agent stops (the dead: no-op) until the episode times out or is lost
        terminated = env.step([1 if avail[1] else 0 for avail in env.get_avail_actions()])[1]
        steps += 1
    assert env.get_stats()["battles_game"] == 1
    with pytest.raises(RuntimeError, match=rf"^step\(\) after the episode ended \(after {steps} steps\): call "
                                           rf"reset\(\) to start the next one$"):
        env.step([1] * env.n_agents)
    assert env.get_stats()["battles_game"] == 1
    assert len(env.get_obs()) == 3 and env.get_state().ndim == 1  # the final observation stays readable
    env.reset()
    env.step([1] * env.n_agents)
    env.close()


@pytest.mark.parametrize("value", [2, -1, 1.5, "0.5", True])
def test_prob_obs_enemy_must_be_a_probability(value):
    with pytest.raises(ValueError, match="^" + re.escape(f"prob_obs_enemy={value!r} must be a probability within [0, 1]")):
        smac.StarCraftCapabilityEnvWrapper(map_name="10gen_protoss", capability_config=PROTOSS_5V5,
                                           prob_obs_enemy=value, backend="builtin")
    with pytest.raises(ValueError, match="must be a probability"):
        main.checked_map("sc2v2", {"map_name": "protoss_5_vs_5", "capability_config": PROTOSS_5V5,
                                   "prob_obs_enemy": value})


@pytest.mark.parametrize("map_name, names, actions", [
    ("3m", ["marine_0", "marine_1", "marine_2"], 8),
    ("2s3z", ["stalker_0", "stalker_1", "zealot_0", "zealot_1", "zealot_2"], 10),
    ("MMM", ["marauder_0", "marauder_1"] + [f"marine_{i}" for i in range(7)] + ["medivac_0"], 15),
])
def test_the_pettingzoo_env_passes_pettingzoos_api_test_with_smacs_names(map_name, names, actions):
    from pettingzoo.test import parallel_api_test

    env = smac_pettingzoo.parallel_env(map_name=map_name, seed=0, backend="builtin")
    assert env.possible_agents == names and env.action_space(names[0]).n == actions
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # its warnings (an agent given data after it died) fail
        parallel_api_test(env, num_cycles=200)
    env.close()


def test_pettingzoo_actions_skip_the_no_op_and_a_seeded_reset_replays():
    env = smac_pettingzoo.parallel_env(map_name="3m", seed=0, backend="builtin")
    first, _ = env.reset(seed=5)
    mask = first["marine_0"]["action_mask"]
    assert mask.tolist() == env.env.get_avail_agent_actions(0)[1:]  # SMAC's actions 1.. as 0..

    def play() -> list:
        observations, _ = env.reset(seed=5)
        trace = [observations["marine_0"]["observation"]]
        for _ in range(5):
            observations, rewards, terminations, _, _ = env.step({name: 1 for name in env.agents})  # SMAC's stop
            trace.append(observations["marine_0"]["observation"])
        return trace

    assert all(np.array_equal(a, b) for a, b in zip(play(), play()))
    env.close()


def test_each_package_name_keeps_its_own_numba_cache():
    """The compiled loops' cache entries name the modules they call, so src/main.py's (envs.starcraft) and an
    editable install's (marlkit.starcraft) live in separate sub-folders of __pycache__."""
    from envs.starcraft.game import collisions

    locator = collisions.walkable_points._cache._impl._locator
    assert locator.get_cache_path() == os.path.join(REPO, "src", "envs", "starcraft", "game", "__pycache__", "envs")


@pytest.mark.parametrize("user_level, expected", [(None, "WARNING"), ("DEBUG", "DEBUG")])
def test_the_package_keeps_numbas_logger_quiet_unless_the_user_set_it(user_level, expected):
    """A host that logs DEBUG at the root (PyMARL2's and EPyMARL's main.py) gets none of Numba's compiler
    lines; a host that set Numba's own level keeps it. In a fresh process: the import is what is tested."""
    setup = f"logging.getLogger('numba').setLevel('{user_level}'); " if user_level else ""
    code = ("import logging; logging.basicConfig(level=logging.DEBUG); " + setup +
            "import envs.starcraft; print(logging.getLevelName(logging.getLogger('numba').level))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=os.path.join(REPO, "src"), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == expected


def random_trace(env_class, map_name: str, steps: int = 150) -> dict:
    """What every public method returns over `steps` steps of seeded random available actions (episodes
    restart), as plain lists; the same function runs in the fresh virtual environment."""
    env = env_class(map_name=map_name, seed=3, backend="builtin")
    rng = np.random.default_rng(0)
    trace = {"env_info": env.get_env_info(), "steps": []}
    observations, state = env.reset()
    for _ in range(steps):
        avail = env.get_avail_actions()
        actions = [int(rng.choice(np.flatnonzero(row))) for row in avail]
        reward, terminated, info = env.step(actions)
        trace["steps"].append([np.asarray(env.get_obs()).round(6).tolist(), env.get_state().round(6).tolist(),
                               avail, float(reward), bool(terminated), {k: float(v) for k, v in info.items()}])
        if terminated:
            env.reset()
    trace["stats"] = env.get_stats()  # battles_won, battles_game, win_rate, timeouts, restarts, ...
    env.close()
    return trace


@pytest.mark.slow
def test_a_fresh_virtual_environment_installs_the_package_without_torch_and_plays_as_marlkit(tmp_path):
    """pip install <checkout> into a new venv outside the repository (no torch), then a random-agents
    loop on each map whose every step equals the in-repo env's under the same seed."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", REPO], check=True, cwd=tmp_path, timeout=900)
    script = inspect.getsource(random_trace)
    out = tmp_path / "traces.json"
    program = (f"import json, sys\nimport numpy as np\nfrom marlkit.smac import StarCraft2Env\n{script}\n"
               f"traces = {{m: random_trace(StarCraft2Env, m) for m in {list(MAPS)!r}}}\n"
               f"assert 'torch' not in sys.modules\njson.dump(traces, open({str(out)!r}, 'w'))\n")
    subprocess.run([python, "-c", program], check=True, cwd=tmp_path, timeout=900)
    assert subprocess.run([python, "-c", "import torch"], cwd=tmp_path, capture_output=True).returncode != 0
    installed = json.loads(out.read_text())
    for map_name in MAPS:
        assert installed[map_name] == json.loads(json.dumps(random_trace(TrainedEnv, map_name))), map_name


class PackageEnvModel:
    """What SMAC's interface promises, as the property test below checks it: the env is fresh (before any
    reset, or after close), in an episode, or past its end; battles are counted once per finished episode."""

    def __init__(self):
        self.phase = "fresh"
        self.battles = 0

    def allows(self, call: str) -> bool:
        if call == "step":
            return self.phase == "running"
        if call in ("get_obs", "get_state", "get_avail_actions"):
            return self.phase != "fresh"
        return True  # reset, close, get_env_info, get_stats (ZeroDivisionError before a battle, as SMAC)


# Actions that are never one whole number per agent of 3m.
BAD_ACTIONS = ([1.5, 1, 1], ["1", "1", "1"], [None, 1, 1], [True, 1, 1], [1, 1], [1, 1, 1, 1], [[1], [1], [1]],
               np.ones((3, 1)), [1, 1, 99], [-1, 1, 1], "111", 7)


CALLS = ["step", "reset", "close", "get_obs", "get_state", "get_avail_actions", "get_stats", "get_env_info"]
CALL_WEIGHTS = [0.8, 0.02, 0.005, 0.04, 0.04, 0.04, 0.04, 0.015]


def random_call(env, rng: np.random.Generator) -> tuple:
    """A call drawn at random: (name, arguments), step with available, unavailable or malformed actions."""
    # Mostly steps, so that episodes reach their end between the rarer resets and closes.
    name = rng.choice(CALLS, p=CALL_WEIGHTS)
    if name != "step":
        return name, ()
    kind = rng.choice(3, p=[0.8, 0.1, 0.1])
    if kind == 0 and env._episode_over is not None:  # an available action per agent (valid while running)
        return name, ([int(rng.choice(np.flatnonzero(avail))) for avail in env.get_avail_actions()],)
    if kind == 1:
        return name, (list(rng.integers(0, env.n_actions, env.n_agents)),)  # may be unavailable
    return name, (BAD_ACTIONS[rng.integers(len(BAD_ACTIONS))],)


@pytest.mark.parametrize("seed", range(3))
def test_any_sequence_of_calls_works_as_smacs_would_or_raises_one_clear_exception(seed):
    """Random sequences of calls (reset, step with good and bad actions of many kinds and shapes, the get_*
    calls, close, reset after close) against PackageEnvModel: each call works when SMAC's would, else
    raises ValueError, RuntimeError, SMAC's AssertionError (an unavailable action) or ZeroDivisionError
    (get_stats before a finished battle) with a one-line message; the stats count every finished battle
    once."""
    rng = np.random.default_rng(seed)
    env, model = smac.StarCraft2Env(map_name="3m", seed=seed, backend="builtin"), PackageEnvModel()
    for _ in range(1500):
        name, args = random_call(env, rng)
        try:
            result = getattr(env, name)(*args)
        except (ValueError, RuntimeError, AssertionError, ZeroDivisionError) as error:
            assert "\n" not in str(error) and str(error), f"{name}{args}: {error!r}"
            if not model.allows(name):  # outside an episode: said so, whatever the arguments
                assert isinstance(error, RuntimeError) and "reset()" in str(error), f"{name}{args}: {error!r}"
            elif name == "step":  # in an episode: the actions' fault
                assert isinstance(error, (ValueError, AssertionError)), f"{name}{args}: {error!r}"
            else:
                assert name == "get_stats" and model.battles == 0, f"{name}{args}: {error!r}"
            continue
        assert model.allows(name), f"{name}{args} should have been refused in phase {model.phase}"
        if name == "reset":
            model.phase = "running"
        elif name == "close":
            model.phase = "fresh"
        elif name == "step" and result[1]:
            model.phase, model.battles = "ended", model.battles + 1
        elif name == "get_stats":
            assert result["battles_game"] == model.battles and result["battles_won"] <= result["battles_game"]
    assert model.battles >= 3  # the sequence ended episodes, and stepped on after some
    env.close()


def shown_against_sight(env) -> tuple[int, int]:
    """(cells where an agent's observation shows an enemy exactly when the enemy is alive and within the
    agent's sight range, all cells) over the living agents of this step."""
    n_en, nf = env.get_obs_enemy_feats_size()
    agree = total = 0
    for a_id, unit in env.agents.items():
        if unit.health <= 0:
            continue
        block = env.get_obs_agent(a_id)[4:4 + n_en * nf].reshape(n_en, nf)  # [enemies, features]
        for e_id, enemy in env.enemies.items():
            distance = np.hypot(enemy.pos.x - unit.pos.x, enemy.pos.y - unit.pos.y)
            in_sight = enemy.health > 0 and distance < env.unit_sight_range(a_id)
            agree += bool(block[e_id].any()) == in_sight
            total += 1
    return agree, total


@pytest.mark.parametrize("hide_only", [True, False])
def test_hide_only_unobserved_enemies_gives_the_observation_rule_of_smacv2s_published_curves(hide_only):
    """SMACv2's published results (oxwhirl/smacv2 cc6ad08, 2023-02-15) predate the prob_obs_enemy lottery
    and the enemy-block wipe of its issue 50 (d302663, 2023-06-06): an agent then saw every living enemy
    within its sight range. With prob_obs_enemy=1.0, hide_only_unobserved_enemies=True is that rule at
    every step; SMACv2's current rule (the default) hides enemies in sight on some steps."""
    env = smac.StarCraftCapabilityEnvWrapper(map_name="10gen_protoss", capability_config=PROTOSS_5V5, seed=3,
                                             prob_obs_enemy=1.0, hide_only_unobserved_enemies=hide_only,
                                             backend="builtin")
    rng = np.random.default_rng(0)
    agree = total = 0
    for _ in range(3):
        env.reset()
        terminated = False
        while not terminated:
            step_agree, step_total = shown_against_sight(env)
            agree, total = agree + step_agree, total + step_total
            actions = [rng.choice(np.flatnonzero(avail)) for avail in env.get_avail_actions()]
            terminated = env.step(actions)[1]
    env.close()
    assert total > 1000
    if hide_only:
        assert agree == total
    else:
        assert agree < total
