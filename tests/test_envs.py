"""Environment registry, MultiAgentEnv interface conformance, matrix game payoffs and the small stag hunt's rules
(PyMARL2's stag hunt has its own tests in test_stag_hunt.py)."""
import os
import subprocess
import sys
from collections import deque

import numpy as np
import pytest
import yaml

from envs import REGISTRY, make_env
from envs.one_step_matrix_game import PAYOFF_PRESETS
from envs.small_stag_hunt import CATCH, DOWN, LEFT, MOVES, NEIGHBOUR_OFFSETS, NOOP, RIGHT, STAG, UP, SmallStagHunt

ENV_CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src", "config", "envs")
PYMARL2_PAYOFF = [[12, -0.1, -0.1], [-0.1, 0, 0], [-0.1, 0, 0]]
SMALL_ENV_ARGS = {
    "one_step_matrix_game": {"map_name": "one_step_matrix_game"},
    "small_stag_hunt": {"map_name": "small_stag_hunt", "seed": 0},
    "stag_hunt": {"map_name": "stag_hunt", "seed": 0},
    "null": {"map_name": "corridor", "seed": 0},
}
# PyMARL2's stag_hunt.yaml overrides many of its class's defaults (capture_action among them), so the
# sizes differ; test_stag_hunt.py checks the YAML's.
YAML_OVERRIDES_DEFAULTS = {"stag_hunt"}


def random_actions(env, rng: np.random.Generator) -> list[int]:
    return [int(rng.choice(np.flatnonzero(avail))) for avail in env.get_avail_actions()]


def run_episode(env, policy) -> float:
    """Play one episode with policy(env) -> actions; returns the undiscounted return."""
    env.reset()
    total, terminated = 0.0, False
    while not terminated:
        reward, terminated, _ = env.step(policy(env))
        total += reward
    return total


# ---- registry ------------------------------------------------------------------------------------
def test_registry_holds_pymarl2_names_smacv2s_and_epymarls():
    assert set(REGISTRY) == {"sc2", "one_step_matrix_game", "stag_hunt", "small_stag_hunt", "null",
                             "sc2wrapped", "sc2v2",  # SMACv2's configs' name and EPyMARL's
                             "gymma"}  # EPyMARL's Gymnasium / PettingZoo door


def test_make_env_unknown_name_lists_known_names():
    known = "gymma, null, one_step_matrix_game, sc2, sc2v2, sc2wrapped, small_stag_hunt, stag_hunt"
    with pytest.raises(ValueError, match=f"unknown env 'foo'; known envs: {known}"):
        make_env("foo")


def test_sc2_simulator_is_imported_only_when_built():
    src = os.path.dirname(os.path.dirname(ENV_CONFIG_DIR))
    probe = "import sys, envs; print('envs.starcraft.interface.starcraft2' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], cwd=src, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("name", ["small_stag_hunt", "stag_hunt"])
def test_unknown_env_arg_is_rejected(name):
    with pytest.raises(TypeError, match="world_size"):
        make_env(name, world_size=[5, 5])


@pytest.mark.parametrize("name", sorted(SMALL_ENV_ARGS))
def test_env_yaml_builds_the_default_env(name):
    with open(os.path.join(ENV_CONFIG_DIR, f"{name}.yaml")) as f:
        config = yaml.safe_load(f)
    assert config["env"] == name
    for key in ("test_nepisode", "test_interval", "log_interval", "runner_log_interval",
                "learner_log_interval", "t_max"):
        assert isinstance(config[key], int) and config[key] > 0, key
    env = make_env(name, seed=0, **config["env_args"])
    if name not in YAML_OVERRIDES_DEFAULTS:
        assert env.get_env_info() == make_env(name).get_env_info()


# ---- interface conformance -----------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(SMALL_ENV_ARGS))
def test_env_info_matches_arrays(name):
    env = make_env(name, **SMALL_ENV_ARGS[name])
    info = env.get_env_info()
    obs, state = env.reset()
    assert len(obs) == info["n_agents"] == env.n_agents
    assert all(o.shape == (info["obs_shape"],) for o in obs)
    assert state.shape == (info["state_shape"],)
    assert env.get_state().shape == (info["state_shape"],)
    assert [o.tolist() for o in env.get_obs()] == [o.tolist() for o in obs]
    avail = env.get_avail_actions()
    assert len(avail) == info["n_agents"]
    for agent_avail in avail:
        assert agent_avail.shape == (info["n_actions"],)
        assert set(np.unique(agent_avail)) <= {0, 1} and agent_avail.sum() >= 1
    assert info["episode_limit"] == env.episode_limit


@pytest.mark.parametrize("name", sorted(SMALL_ENV_ARGS))
def test_step_return_types_and_length_bound(name):
    env = make_env(name, **SMALL_ENV_ARGS[name])
    rng = np.random.default_rng(0)
    for _ in range(5):
        env.reset()
        terminated, steps = False, 0
        while not terminated:
            reward, terminated, info = env.step(random_actions(env, rng))
            assert type(reward) is float and type(terminated) is bool and isinstance(info, dict)
            steps += 1
        assert steps <= env.episode_limit
        assert isinstance(env.get_stats(), dict)


@pytest.mark.parametrize("name", sorted(SMALL_ENV_ARGS))
def test_bad_actions_are_rejected(name):
    env = make_env(name, **SMALL_ENV_ARGS[name])
    env.reset()
    with pytest.raises(ValueError, match="expected one per agent"):
        env.step([0] * (env.n_agents + 1))
    with pytest.raises(ValueError, match="cannot take action"):
        env.step([env.n_actions] * env.n_agents)


@pytest.mark.parametrize("map_name", ["corridor", "3m"])
def test_null_env_has_the_smac_shapes_and_fixed_episodes(map_name):
    smac_shapes = {"corridor": (6, 30, 156, 282, 400), "3m": (3, 9, 30, 48, 60)}[map_name]
    env = make_env("null", map_name=map_name, seed=1)
    info = env.get_env_info()
    assert (info["n_agents"], info["n_actions"], info["obs_shape"], info["state_shape"],
            info["episode_limit"]) == smac_shapes
    wins = []
    for _ in range(40):
        env.reset()
        rewards = [env.step([0] * env.n_agents) for _ in range(env.episode_length)]
        assert [terminated for _, terminated, _ in rewards] == [False] * (env.episode_length - 1) + [True]
        wins.append(rewards[-1][2]["battle_won"])
        assert rewards[-1][0] == float(wins[-1])
    assert 0 < sum(wins) < 40  # drawn at random
    assert env.get_stats()["battles_game"] == 40
    assert (np.asarray(env.get_avail_actions()) == 1).all()


def test_null_env_bad_args():
    with pytest.raises(ValueError, match="unknown null env map 'foo'"):
        make_env("null", map_name="foo")
    with pytest.raises(ValueError, match="unknown null env argument"):
        make_env("null", n_agent=3)
    with pytest.raises(ValueError, match="episode_length must be within"):
        make_env("null", episode_length=401)


def test_step_accepts_the_runners_torch_actions():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    env = make_env("one_step_matrix_game", matrix="monotonic")
    env.reset()
    assert env.step(torch.tensor([1, 0]))[0] == 6.0


def test_small_stag_hunt_cut_by_limit_sets_episode_limit():
    env = make_env("small_stag_hunt", episode_limit=7, seed=1)
    env.reset()
    infos = [env.step([NOOP] * env.n_agents) for _ in range(7)]
    assert [terminated for _, terminated, _ in infos] == [False] * 6 + [True]
    assert [info.get("episode_limit", False) for _, _, info in infos] == [False] * 6 + [True]
    with pytest.raises(RuntimeError, match="call reset"):
        env.step([NOOP] * env.n_agents)


def test_small_stag_hunt_natural_end_is_not_a_limit_cut():
    env = SmallStagHunt(n_agents=1, n_stags=0, n_hares=1, stag_catchers=1, episode_limit=1, seed=0)
    place(env, agents=[(0, 0)], prey=[(0, 1)])
    reward, terminated, info = env.step([CATCH])
    assert (reward, terminated, "episode_limit" in info) == (1.0, True, False)


def test_matrix_game_ends_naturally_after_one_step():
    env = make_env("one_step_matrix_game")
    obs, state = env.reset()
    assert state.tolist() == [1.0, 0.0] and obs[1].tolist() == [1.0, 0.0]
    _, terminated, info = env.step([1, 1])
    assert terminated is True and "episode_limit" not in info
    assert env.get_state().tolist() == [0.0, 1.0]
    with pytest.raises(RuntimeError, match="call reset"):
        env.step([0, 0])


# ---- matrix game -----------------------------------------------------------------------------------
def joint_payoffs(env) -> list[list[float]]:
    table = []
    for first in range(env.n_actions):
        row = []
        for second in range(env.n_actions):
            env.reset()
            row.append(env.step(np.array([first, second]))[0])
        table.append(row)
    return table


@pytest.mark.parametrize("env_args, expected", [
    ({}, PYMARL2_PAYOFF),
    ({"matrix": "monotonic"}, [[12, 6, 0], [6, 3, 0], [0, 0, 0]]),
    ({"payoff": [[1, 2], [3, 4]]}, [[1, 2], [3, 4]]),
])
def test_matrix_game_pays_every_joint_action(env_args, expected):
    env = make_env("one_step_matrix_game", **env_args)
    assert env.n_actions == len(expected)
    assert joint_payoffs(env) == expected


def test_matrix_presets_monotonicity():
    monotonic = np.array(PAYOFF_PRESETS["monotonic"])
    # Non-increasing along both agents' action index, with a unique best joint action (0, 0).
    assert np.all(np.diff(monotonic, axis=0) <= 0) and np.all(np.diff(monotonic, axis=1) <= 0)
    assert np.sum(monotonic == monotonic.max()) == 1 and monotonic[0, 0] == monotonic.max()
    # PyMARL2's default: agent 0's preference between actions 0 and 1 flips with agent 1's action.
    default = np.array(PAYOFF_PRESETS["nonmonotonic"])
    assert default[0, 0] > default[1, 0] and default[0, 1] < default[1, 1]


@pytest.mark.parametrize("env_args, message", [
    ({"matrix": "diagonal"}, "unknown matrix 'diagonal'; known matrices: monotonic, nonmonotonic"),
    ({"matrix": "monotonic", "payoff": [[1]]}, "not both"),
    ({"payoff": [[1, 2, 3], [4, 5, 6]]}, r"square .* got shape \[2, 3\]"),
    ({"payoff": [[1, "x"], [2, 3]]}, "square nested list of numbers"),
])
def test_matrix_game_bad_args(env_args, message):
    with pytest.raises(ValueError, match=message):
        make_env("one_step_matrix_game", **env_args)


# ---- small stag hunt rules ---------------------------------------------------------------------------
def place(env: SmallStagHunt, agents, prey) -> None:
    """Put agents and prey (stags first, then hares, as in env.prey_kind) on given (row, col) cells."""
    env.reset()
    env.agent_pos[:] = agents
    env.prey_pos[:] = prey
    env.prey_alive[:] = True


def hunt(**overrides) -> SmallStagHunt:
    args = {"n_agents": 2, "n_stags": 1, "n_hares": 1, "prey_move_prob": 0.0, "seed": 0}
    return SmallStagHunt(**{**args, **overrides})


def test_stag_needs_two_adjacent_catchers():
    env = hunt()
    place(env, agents=[(1, 1), (2, 2)], prey=[(1, 2), (4, 4)])
    assert env.get_avail_agent_actions(0)[CATCH] == 1
    reward, terminated, info = env.step([CATCH, NOOP])
    assert (reward, terminated, env.prey_alive.tolist()) == (0.0, False, [True, True])
    reward, terminated, info = env.step([CATCH, CATCH])
    assert (reward, terminated, info["stags_caught"]) == (10.0, False, 1)
    assert env.prey_alive.tolist() == [False, True]


def test_hare_needs_one_catcher_and_episode_ends_when_all_prey_caught():
    env = hunt()
    place(env, agents=[(0, 0), (3, 3)], prey=[(4, 0), (3, 4)])
    assert env.get_avail_agent_actions(0)[CATCH] == 0
    reward, terminated, info = env.step([NOOP, CATCH])
    assert (reward, terminated, info["hares_caught"]) == (1.0, False, 1)
    env.agent_pos[:] = [(3, 0), (4, 1)]
    reward, terminated, info = env.step([CATCH, CATCH])
    assert (reward, terminated) == (10.0, True)
    assert env.get_stats() == {"episodes": 1, "stags_caught": 1, "hares_caught": 1}


def test_moves_stay_on_grid_and_are_blocked_by_occupied_cells():
    env = hunt()
    place(env, agents=[(0, 0), (0, 1)], prey=[(4, 4), (1, 0)])
    assert env.get_avail_agent_actions(0).tolist() == [1, 0, 1, 0, 1, 1]
    env.step([RIGHT, DOWN])  # agent 0 bumps into agent 1 (which moves after it); agent 1 moves down
    assert env.agent_pos.tolist() == [[0, 0], [1, 1]]
    env.step([DOWN, LEFT])   # agent 0 blocked by the hare; agent 1 blocked too
    assert env.agent_pos.tolist() == [[0, 0], [1, 1]]
    env.step([RIGHT, UP])    # now the cell (0, 1) is free for agent 0, then agent 1 is blocked
    assert env.agent_pos.tolist() == [[0, 1], [1, 1]]


def test_observation_is_a_local_window_and_state_is_global():
    env = hunt(agent_obs=1)
    place(env, agents=[(0, 0), (4, 4)], prey=[(1, 1), (3, 4)])
    window = env.get_obs_agent(0)[:-2].reshape(3, 3, 4)  # [rows, cols, (agents, stags, hares, outside)]
    assert window[2, 2, 1] == 1 and window[..., 1].sum() == 1  # the stag, diagonal down-right
    assert window[..., 0].sum() == 0 and window[..., 2].sum() == 0  # far agent and hare unseen
    assert window[0, :, 3].tolist() == [1, 1, 1] and window[1:, 0, 3].tolist() == [1, 1]
    assert env.get_obs_agent(0)[-2:].tolist() == [0.0, 0.0]
    assert env.get_obs_agent(1)[:-2].reshape(3, 3, 4)[0, 1, 2] == 1  # the hare, one row up
    state = env.get_state().reshape(5, 5, 4)  # [rows, cols, (agent 0, agent 1, stags, hares)]
    assert state[0, 0, 0] == state[4, 4, 1] == state[1, 1, 2] == state[3, 4, 3] == 1
    assert state.sum() == 4


def test_small_stag_hunt_is_deterministic_given_seed():
    def trajectory(seed: int) -> list:
        env = make_env("small_stag_hunt", seed=seed, prey_move_prob=0.5)
        policy_rng = np.random.default_rng(7)
        steps = []
        for _ in range(3):
            env.reset()
            terminated = False
            while not terminated:
                reward, terminated, _ = env.step(random_actions(env, policy_rng))
                steps.append((env.get_state().tobytes(), reward))
        return steps

    assert trajectory(seed=5) == trajectory(seed=5)
    assert trajectory(seed=5) != trajectory(seed=6)


def test_small_stag_hunt_bad_args():
    with pytest.raises(ValueError, match="stag_catchers=3 exceeds n_agents=2"):
        SmallStagHunt(stag_catchers=3)
    with pytest.raises(ValueError, match="do not fit on a 2x2 grid"):
        SmallStagHunt(world_shape=[2, 2], n_agents=2, n_hares=2)
    with pytest.raises(ValueError, match=r"'world_shape' must be \[height, width\]"):
        SmallStagHunt(world_shape=5)
    with pytest.raises(ValueError, match="'n_agents' must be a positive int"):
        SmallStagHunt(n_agents=0)


# ---- coordination pays -----------------------------------------------------------------------------
def first_step_towards(env: SmallStagHunt, agent: int, goals: set) -> int:
    """Breadth-first search over free cells; the first move of a shortest path to any goal (noop if none)."""
    start = tuple(env.agent_pos[agent])
    frontier, first_move = deque([start]), {start: NOOP}
    while frontier:
        cell = frontier.popleft()
        if cell in goals:
            return first_move[cell]
        for action in (UP, DOWN, LEFT, RIGHT):
            nxt = tuple(np.array(cell) + MOVES[action])
            if nxt not in first_move and env._is_free(np.array(nxt)):
                first_move[nxt] = action if cell == start else first_move[cell]
                frontier.append(nxt)
    return NOOP


def neighbours(env: SmallStagHunt, cell) -> set:
    return {tuple(c) for c in np.asarray(cell) + NEIGHBOUR_OFFSETS if env._in_grid(c)}


def coordinated_policy(env: SmallStagHunt) -> list[int]:
    """Scripted team (reads the true state): surround the stag and catch together, then take hares."""
    stags = np.flatnonzero(env.prey_alive & (env.prey_kind == STAG))
    actions = []
    if len(stags) == 0:
        for agent in range(env.n_agents):
            if env.get_avail_agent_actions(agent)[CATCH]:
                actions.append(CATCH)
            else:
                goals = set().union(*(neighbours(env, env.prey_pos[p]) for p in np.flatnonzero(env.prey_alive)))
                actions.append(first_step_towards(env, agent, goals))
        return actions
    stag_cells = neighbours(env, env.prey_pos[stags[0]])
    beside = [tuple(pos) in stag_cells for pos in env.agent_pos]
    if sum(beside) >= env.stag_catchers:
        return [CATCH if is_beside else NOOP for is_beside in beside]
    # On the way, take a hare within reach: it may be what blocks the last free cell by the stag.
    return [NOOP if is_beside else CATCH if env.get_avail_agent_actions(agent)[CATCH]
            else first_step_towards(env, agent, stag_cells)
            for agent, is_beside in enumerate(beside)]


def mean_return(env, policy, n_episodes: int) -> float:
    return float(np.mean([run_episode(env, policy) for _ in range(n_episodes)]))


def test_coordinated_policy_beats_random_policy():
    rng = np.random.default_rng(0)
    random_mean = mean_return(make_env("small_stag_hunt", seed=0), lambda env: random_actions(env, rng), 200)
    scripted_mean = mean_return(make_env("small_stag_hunt", seed=0), coordinated_policy, 200)
    assert scripted_mean >= 10.0, scripted_mean
    assert random_mean <= 3.0, random_mean
    assert scripted_mean >= 5 * random_mean, (scripted_mean, random_mean)
