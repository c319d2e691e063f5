"""PyMARL2's stag hunt (envs/stag_hunt.py): sizes, rules on hand-built positions, layouts, seeding.

Positions are (row, col), rows growing downwards; grids are [row, col, feature] with the features
agents, stags, hares (then walls/unknown with observe_one_hot, then the ghost indicator).
"""
import os

import numpy as np
import pytest
import yaml

from envs import make_env
from envs.stag_hunt import AGENT, CATCH, DOWN, HARE, LEFT, RIGHT, STAG, STAY, UP, StagHunt

LOOK_DOWN, LOOK_UP = 7, 9
YAML_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         "src", "config", "envs", "stag_hunt.yaml")
with open(YAML_PATH) as f:
    CONFIG = yaml.safe_load(f)
YAML_ARGS = CONFIG["env_args"]


def yaml_env(**overrides) -> StagHunt:
    """The env of PyMARL2's stag_hunt.yaml (8 agents, 8 stags, 10x10, catch by 2), with overrides."""
    return StagHunt(**{**YAML_ARGS, "seed": 0, **overrides})


def place(env: StagHunt, agents, stags=(), hares=()) -> None:
    """Start an episode with the agents and prey on the given (row, col) cells."""
    env.reset()
    env.grid.fill(0.0)
    env.agent_pos[:] = agents
    env.prey_pos[:] = list(stags) + list(hares)
    env.prey_alive[:] = True
    env.frozen[:] = False
    for cells, feature in ((agents, AGENT), (stags, STAG), (hares, HARE)):
        for row, col in cells:
            env.grid[row, col, feature] = 1.0


def window(env: StagHunt, agent: int) -> np.ndarray:
    """The agent's observation as [rows, cols, features]."""
    rows, cols = (2 * r + 1 for r in env.agent_obs)
    return env.get_obs_agent(agent).reshape(rows, cols, env.n_feats)


def state(env: StagHunt) -> np.ndarray:
    return env.get_state().reshape(env.height, env.width, env.n_feats)


def f32_sum(*terms: float) -> float:
    """A step's reward as PyMARL2 sums it: in float32, term by term."""
    total = np.float32(terms[0])
    for term in terms[1:]:
        total = np.float32(total + np.float32(term))
    return float(total)


# ---- configuration and sizes ------------------------------------------------------------------------
def test_yaml_is_pymarl2s_env_config():
    assert CONFIG["env"] == "stag_hunt"
    assert {key: CONFIG[key] for key in ("test_greedy", "test_nepisode", "test_interval", "log_interval",
                                         "runner_log_interval", "learner_log_interval", "t_max", "obs_agent_id")} == {
        "test_greedy": True, "test_nepisode": 16, "test_interval": 10000, "log_interval": 10000,
        "runner_log_interval": 10000, "learner_log_interval": 10000, "t_max": 2050000, "obs_agent_id": False}
    assert YAML_ARGS == {
        "map_name": "stag_hunt", "capture_action": True, "n_agents": 8, "n_stags": 8, "n_hare": 0,
        "miscapture_punishment": 0, "agent_obs": [2, 2], "agent_move_block": [0, 1, 2],
        "capture_conditions": [0, 1], "capture_action_conditions": [2, 1], "capture_freezes": True,
        "capture_terminal": False, "directed_observations": False, "directed_cone_narrow": True,
        "directed_exta_actions": True, "episode_limit": 200, "intersection_global_view": False,
        "intersection_unknown": False, "mountain_slope": 0.0, "mountain_spawn": False, "mountain_agent_row": -1,
        "observe_state": False, "observe_walls": False, "observe_ids": False, "observe_one_hot": False,
        "p_stags_rest": 0.0, "p_hare_rest": 0.0, "prevent_cannibalism": True, "print_caught_prey": False,
        "print_frozen_agents": False, "random_ghosts": False, "random_ghosts_prob": 0.5, "random_ghosts_mul": -1,
        "random_ghosts_indicator": False, "remove_frozen": True, "reward_hare": 1, "reward_stag": 10,
        "reward_collision": 0, "reward_time": 0, "state_as_graph": False, "toroidal": False,
        "world_shape": [10, 10]}


def test_yaml_sizes_follow_pymarl2s_formulas():
    env = make_env("stag_hunt", seed=0, **YAML_ARGS)
    n_feats = 3  # agents, stags, hares: no one-hot walls/unknown, no ghosts
    assert env.get_env_info() == {
        "state_shape": 10 * 10 * n_feats,                       # 300
        "obs_shape": n_feats * (2 * 2 + 1) * (2 * 2 + 1),       # 75
        "n_actions": 6,                                         # 4 moves, stay, catch
        "n_agents": 8, "episode_limit": 200}


@pytest.mark.parametrize("overrides, n_feats, obs_size, n_actions", [
    ({}, 3, 3 * 5 * 5, 5),  # PyMARL2's class defaults: no catch action
    ({"capture_action": True}, 3, 3 * 5 * 5, 6),
    ({"observe_one_hot": True, "random_ghosts": True}, 6, 6 * 5 * 5, 5),
    ({"directed_observations": True}, 3, 3 * 3 * 3, 10),  # narrow cone: (2*2-1)^2 cells
    ({"directed_observations": True, "directed_cone_narrow": False, "directed_exta_actions": False}, 3, 75, 5),
    ({"observe_state": True}, 3, 300 + 100, 5),  # the state plus an own-cell feature
    ({"intersection_global_view": True}, 3, 300, 5),
    ({"agent_obs": [1, 3], "world_shape": [6, 9]}, 3, 3 * 3 * 7, 5),
])
def test_sizes(overrides, n_feats, obs_size, n_actions):
    env = StagHunt(seed=0, **overrides)
    assert (env.n_feats, env.get_obs_size(), env.n_actions) == (n_feats, obs_size, n_actions)
    assert env.get_state_size() == env.height * env.width * n_feats
    assert all(obs.shape == (obs_size,) for obs in env.get_obs())


def test_class_defaults_are_pymarl2s():
    env = StagHunt()
    assert (env.reward_time, env.reward_stag, env.reward_hare, env.miscapture_punishment) == (-0.1, 2.0, 1.0, -2.0)
    assert (env.capture_action, env.capture_terminal, env.capture_freezes, env.remove_frozen) == \
        (False, True, True, False)
    assert (env.observe_walls, env.truncate_episodes, env.capture_action_conditions) == (True, True, (2, 1))
    assert env.agent_move_block.tolist() == [0]
    assert StagHunt(reward_stag=5.0).miscapture_punishment == -5.0


def test_bad_arguments():
    with pytest.raises(TypeError, match="world_size"):
        make_env("stag_hunt", world_size=[5, 5])
    with pytest.raises(ValueError, match="state_as_graph=True is not supported"):
        StagHunt(state_as_graph=True)
    with pytest.raises(ValueError, match="non-batch mode"):
        StagHunt(batch_size=4)
    with pytest.raises(ValueError, match="do not fit on a 3x3 grid"):
        StagHunt(world_shape=[3, 3], n_agents=5, n_stags=5)
    with pytest.raises(ValueError, match="'agent_obs' must be a pair"):
        StagHunt(agent_obs=2)
    with pytest.raises(ValueError, match="only 10 cells"):
        StagHunt(mountain_agent_row=0, n_agents=11)
    with pytest.raises(ValueError, match="agent_move_block"):
        StagHunt(agent_move_block=[3])


# ---- capture rules ----------------------------------------------------------------------------------
def test_two_catching_agents_catch_a_stag_freeze_and_leave_the_grid():
    env = yaml_env(n_agents=3, n_stags=2)
    place(env, agents=[(5, 4), (4, 5), (0, 0)], stags=[(5, 5), (9, 9)])
    assert [env.get_avail_agent_actions(a)[CATCH] for a in range(3)] == [1, 1, 0]
    reward, terminated, info = env.step([CATCH, CATCH, STAY])
    assert (reward, terminated, info) == (10.0, False, {"episode_limit": False})
    assert env.prey_alive.tolist() == [False, True] and env.frozen.tolist() == [True, True, False]
    grid = state(env)
    assert grid[5, 5, STAG] == 0 and grid[5, 4, AGENT] == grid[4, 5, AGENT] == 0  # remove_frozen: gone
    assert grid[0, 0, AGENT] == 1
    for agent in (0, 1):  # frozen: only 'stay', and a blank observation
        assert env.get_avail_agent_actions(agent).tolist() == [0, 0, 0, 0, 1, 0]
        assert not env.get_obs_agent(agent).any()
    assert env.get_stats()["stags_caught"] == 1


def test_a_lone_catch_is_a_miscapture():
    env = yaml_env(n_agents=2, n_stags=1, miscapture_punishment=-1.0, p_stags_rest=1.0)
    place(env, agents=[(5, 4), (0, 0)], stags=[(5, 5)])
    reward, terminated, _ = env.step([CATCH, STAY])
    assert (reward, terminated, env.prey_alive.tolist(), env.frozen.tolist()) == (-1.0, False, [True], [False, False])
    # PyMARL2's class default punishes a miscapture with -reward_stag.
    env = StagHunt(seed=0, n_agents=2, n_stags=1, capture_action=True, reward_time=0.0, p_stags_rest=1.0)
    place(env, agents=[(5, 4), (0, 0)], stags=[(5, 5)])
    assert env.step([CATCH, STAY])[0] == -2.0


def test_catch_is_available_only_next_to_a_prey():
    env = yaml_env(n_agents=2, n_stags=1)
    place(env, agents=[(5, 3), (6, 5)], stags=[(5, 5)])
    assert [env.get_avail_agent_actions(a)[CATCH] for a in range(2)] == [0, 1]  # diagonal does not count


def test_without_the_catch_action_a_boxed_in_prey_is_caught():
    env = StagHunt(seed=0, n_agents=3, n_stags=1)  # PyMARL2's class defaults: capture_conditions [0, 1]
    place(env, agents=[(0, 1), (1, 0), (2, 2)], stags=[(0, 0)])  # walls and two agents box the stag in
    reward, terminated, info = env.step([STAY, STAY, STAY])
    assert reward == pytest.approx(f32_sum(-0.1, 2.0)) and reward == f32_sum(-0.1, 2.0)
    assert (terminated, info["episode_limit"]) == (True, False)  # capture_terminal and all prey caught
    assert env.frozen.tolist() == [True, True, False]  # the agents next to the stag
    grid = state(env)
    assert grid[0, 1, AGENT] == grid[1, 0, AGENT] == 1  # not removed: still in the state...
    seen = window(env, 2)  # ... but other agents no longer see them
    assert seen[..., AGENT].sum() == 1 and seen[2, 2, AGENT] == 1


def test_capture_conditions_per_prey_type():
    env = StagHunt(seed=0, n_agents=4, n_stags=1, n_hare=1, capture_terminal=False, reward_time=0.0)
    # Each prey at the top edge with two agents beside it has one free cell: enough for a hare
    # (condition 1), not for a stag (condition 0).
    place(env, agents=[(0, 1), (1, 2), (0, 6), (1, 7)], stags=[(0, 2)], hares=[(0, 7)])
    reward, terminated, _ = env.step([STAY] * 4)
    assert (reward, env.prey_alive.tolist(), env.frozen.tolist()) == (1.0, [True, False], [False, False, True, True])


@pytest.mark.parametrize("prevent_cannibalism, caught", [(True, False), (False, True)])
def test_prevent_cannibalism(prevent_cannibalism, caught):
    env = StagHunt(seed=0, n_agents=1, n_stags=1, n_hare=2, prevent_cannibalism=prevent_cannibalism,
                   p_hare_rest=1.0, capture_terminal=False, reward_time=0.0)
    place(env, agents=[(9, 9)], stags=[(0, 0)], hares=[(0, 1), (1, 0)])  # the hares box the stag in
    reward, _, _ = env.step([STAY])
    assert (reward, bool(env.prey_alive[0])) == ((2.0, False) if caught else (0.0, True))


def test_all_frozen_agents_end_the_episode():
    env = yaml_env(n_agents=2, n_stags=2)
    place(env, agents=[(5, 4), (4, 5)], stags=[(5, 5), (9, 9)])
    reward, terminated, info = env.step([CATCH, CATCH])
    assert (reward, terminated, info["episode_limit"], env.prey_alive.tolist()) == (10.0, True, False, [False, True])
    with pytest.raises(RuntimeError, match="call reset"):
        env.step([STAY, STAY])


def test_capture_terminal_ends_at_the_first_capture():
    env = yaml_env(n_agents=3, n_stags=2, capture_terminal=True)
    place(env, agents=[(5, 4), (4, 5), (0, 0)], stags=[(5, 5), (9, 9)])
    assert env.step([CATCH, CATCH, STAY])[1] is True


# ---- movement ---------------------------------------------------------------------------------------
def test_moves_blocked_by_agents_and_prey_and_walls():
    env = yaml_env(n_agents=2, n_stags=1, p_stags_rest=1.0)
    place(env, agents=[(0, 0), (0, 1)], stags=[(1, 0)])
    assert env.get_avail_agent_actions(0).tolist() == [1, 1, 0, 0, 1, 1]  # right, down, -, -, stay, catch
    env.step([DOWN, RIGHT])  # agent 0 is blocked by the stag; agent 1 moves right
    assert env.agent_pos.tolist() == [[0, 0], [0, 2]]


def test_agents_may_step_onto_prey_that_then_flee():
    # PyMARL2's class default agent_move_block [0]: only agents block agents. A prey with an agent
    # on its cell cannot rest and moves away.
    env = StagHunt(seed=0, n_agents=1, n_stags=1, p_stags_rest=1.0, capture_terminal=False)
    place(env, agents=[(5, 4)], stags=[(5, 5)])
    env.step([RIGHT])
    assert env.agent_pos.tolist() == [[5, 5]] and env.prey_pos.tolist() != [[5, 5]]


def test_staying_collides_with_oneself_when_agents_block_agents():
    env = StagHunt(seed=0, n_agents=2, n_stags=1, reward_collision=-0.5, reward_time=0.0, p_stags_rest=1.0)
    place(env, agents=[(5, 5), (7, 7)], stags=[(0, 9)])
    assert env.step([STAY, RIGHT])[0] == -0.5


def test_mountain_slope_one_stops_every_up_move():
    env = StagHunt(seed=0, n_agents=1, n_stags=1, mountain_slope=1.0, p_stags_rest=1.0)
    place(env, agents=[(5, 5)], stags=[(0, 9)])
    env.step([UP])
    assert env.agent_pos.tolist() == [[5, 5]]
    env.step([LEFT])
    assert env.agent_pos.tolist() == [[5, 4]]


def test_toroidal_moves_wrap_and_are_all_available():
    env = StagHunt(seed=0, n_agents=1, n_stags=1, toroidal=True, p_stags_rest=1.0)
    place(env, agents=[(0, 0)], stags=[(5, 5)])
    assert env.get_avail_agent_actions(0).tolist() == [1, 1, 1, 1, 1]
    env.step([UP])
    assert env.agent_pos.tolist() == [[9, 0]]


# ---- observations and state -------------------------------------------------------------------------
def test_observation_layout():
    env = yaml_env(n_agents=3, n_stags=2)
    place(env, agents=[(5, 5), (7, 3), (0, 0)], stags=[(4, 7), (9, 9)])
    obs = env.get_obs_agent(0)
    # A 5x5 window centred on the agent: the stag one row up and two columns right is at [1, 4].
    assert obs[(1 * 5 + 4) * 3 + STAG] == 1
    seen = window(env, 0)
    assert seen[2, 2, AGENT] == 1 and seen[4, 0, AGENT] == 1  # itself, and agent 1 (two down, two left)
    assert seen.sum() == 3  # agent 2 and the far stag are out of view; no walls (observe_walls False)


def test_walls_when_observe_walls():
    env = StagHunt(seed=0, n_agents=1, n_stags=1)  # PyMARL2's class default: observe_walls True
    place(env, agents=[(0, 1)], stags=[(9, 9)])
    seen = window(env, 0)[..., AGENT]  # without observe_one_hot, walls read -1 in the agent feature
    expected = np.zeros((5, 5))
    expected[:2, :] = -1   # the two rows above the grid
    expected[:, 0] = -1    # the column left of the grid
    expected[2, 2] = 1     # the agent itself
    assert seen.tolist() == expected.tolist()
    env = StagHunt(seed=0, n_agents=1, n_stags=1, observe_one_hot=True)
    place(env, agents=[(0, 1)], stags=[(9, 9)])
    seen = window(env, 0)
    assert (seen[..., 3] == (expected == -1)).all() and seen[..., AGENT].sum() == 1  # walls as their own +1 feature


def test_observe_ids_shows_numbers():
    env = StagHunt(seed=0, n_agents=2, n_stags=2, observe_ids=True, observe_walls=False)
    place(env, agents=[(5, 5), (5, 6)], stags=[(9, 9), (4, 5)])
    seen = window(env, 0)
    assert (seen[2, 2, AGENT], seen[2, 3, AGENT], seen[1, 2, STAG]) == (1, 2, 2)


def test_state_layout():
    env = yaml_env(n_agents=2, n_stags=1, n_hare=1)
    place(env, agents=[(0, 0), (3, 7)], stags=[(9, 2)], hares=[(4, 4)])
    flat = env.get_state()
    assert flat.shape == (300,)
    assert {int(i) for i in np.flatnonzero(flat)} == {(0 * 10 + 0) * 3 + AGENT, (3 * 10 + 7) * 3 + AGENT,
                                                       (9 * 10 + 2) * 3 + STAG, (4 * 10 + 4) * 3 + HARE}


def test_observe_state_adds_the_own_cell():
    env = StagHunt(seed=0, n_agents=2, n_stags=1, observe_state=True)
    place(env, agents=[(1, 2), (8, 8)], stags=[(5, 5)])
    obs = env.get_obs_agent(1).reshape(10, 10, 4)
    assert (obs[..., :3] == state(env)).all()
    assert np.flatnonzero(obs[..., 3]).tolist() == [8 * 10 + 8]


def test_directed_observations_show_the_faced_cone():
    env = StagHunt(seed=0, n_agents=1, n_stags=1, directed_observations=True, capture_action=True,
                   observe_walls=False, p_stags_rest=1.0, capture_terminal=False)
    place(env, agents=[(5, 5)], stags=[(3, 5)])
    env.step([LOOK_UP])
    cone = env.get_obs_agent(0).reshape(3, 3, 3)
    # Facing up, a narrow cone over a 5x5 window: the top row's middle three cells, then the cell
    # below their middle; every other cell reads -1.
    visible = np.zeros((3, 3), dtype=bool)
    visible[0, :] = visible[1, 1] = True
    assert (cone[~visible] == -1).all() and (cone[visible] >= 0).all()
    assert cone[0, 1, STAG] == 1  # the stag two rows up
    assert env.get_avail_agent_actions(0)[CATCH] == 0
    env.step([LOOK_DOWN])
    assert env.get_obs_agent(0)[np.arange(27) % 3 == STAG].max() == 0  # the stag is behind it now


def test_directed_catch_only_in_the_faced_direction():
    env = StagHunt(seed=0, n_agents=1, n_stags=1, directed_observations=True, capture_action=True,
                   p_stags_rest=1.0, capture_terminal=False)
    place(env, agents=[(5, 5)], stags=[(4, 5)])
    env.step([LOOK_UP])
    assert env.get_avail_agent_actions(0)[CATCH] == 1
    env.step([LOOK_DOWN])
    assert env.get_avail_agent_actions(0)[CATCH] == 0


# ---- episodes, seeding, PyMARL2 trajectories --------------------------------------------------------
@pytest.mark.parametrize("truncate_episodes", [True, False])
def test_time_out(truncate_episodes):
    env = StagHunt(seed=0, n_agents=1, n_stags=1, episode_limit=5, truncate_episodes=truncate_episodes)
    steps = [env.step([STAY]) for _ in range(5)]
    assert [terminated for _, terminated, _ in steps] == [False] * 4 + [True]
    assert [info["episode_limit"] for _, _, info in steps] == [False] * 4 + [truncate_episodes]
    assert all(type(reward) is float and reward == float(np.float32(-0.1)) for reward, _, _ in steps)


def random_trajectory(seed: int, n_steps: int) -> list:
    env = make_env("stag_hunt", **{**YAML_ARGS, "seed": seed})
    policy = np.random.default_rng(1)
    steps = []
    for _ in range(n_steps):
        avail = env.get_avail_actions()
        reward, terminated, info = env.step([int(policy.choice(np.flatnonzero(row))) for row in avail])
        obs = env.get_obs()
        assert len(obs) == 8 and all(o.shape == (75,) and o.dtype == np.float32 for o in obs)
        assert all(row.shape == (6,) and row.sum() >= 1 for row in env.get_avail_actions())
        assert type(reward) is float and type(terminated) is bool and np.isfinite(reward)
        steps.append((env.get_state().tobytes(), reward, terminated))
        if terminated:
            env.reset()
    return steps


def test_random_policy_on_the_yaml_settings_and_determinism():
    first = random_trajectory(seed=5, n_steps=400)
    assert first == random_trajectory(seed=5, n_steps=400)
    assert first != random_trajectory(seed=6, n_steps=400)
    assert any(terminated for _, _, terminated in first)  # two 200-step episodes at most


def scripted_actions(env: StagHunt, t: int) -> list[int]:
    """Catch where possible, else cycle through the available actions."""
    actions = []
    for agent, avail in enumerate(env.get_avail_actions()):
        choices = np.flatnonzero(avail)
        actions.append(CATCH if env.capture_action and avail[CATCH] else int(choices[(t + 3 * agent) % len(choices)]))
    return actions


# Recorded from PyMARL2's own StagHunt (numpy's global generator seeded with 0, random_integers as
# randint): the first placement and one episode of scripted_actions.
PYMARL2_EPISODES = [
    (dict(YAML_ARGS),
     [[5, 0], [3, 3], [7, 9], [3, 5], [2, 4], [7, 6], [8, 8], [1, 6]],
     [[7, 7], [8, 1], [5, 9], [8, 9], [4, 3], [0, 3], [2, 3], [3, 7]], [0, 1, 1, 1, 3, 0, 3, 2],
     200, 20.0, [1, 1, 1, 0, 1, 1, 0, 1], [0, 1, 1, 0, 1, 0, 1, 0]),
    ({"n_agents": 4, "n_stags": 2, "n_hare": 3},
     [[5, 0], [3, 3], [7, 9], [3, 5]], [[2, 4], [7, 6], [8, 8], [1, 6], [7, 7]], [2, 0, 1, 1],
     12, -0.20000004023313522, [1, 1, 1, 1, 0], [0, 0, 1, 0]),
]


@pytest.mark.parametrize("args, agents, prey, orientation, length, episode_return, alive, frozen", PYMARL2_EPISODES)
def test_matches_a_pymarl2_episode(args, agents, prey, orientation, length, episode_return, alive, frozen):
    env = StagHunt(**{**args, "seed": 0})
    assert (env.agent_pos.tolist(), env.prey_pos.tolist(), env.orientation.tolist()) == (agents, prey, orientation)
    total, steps, terminated = 0.0, 0, False
    while not terminated:
        reward, terminated, _ = env.step(scripted_actions(env, steps))
        total += reward
        steps += 1
    assert (steps, total) == (length, episode_return)
    assert (env.prey_alive.astype(int).tolist(), env.frozen.astype(int).tolist()) == (alive, frozen)


def test_render_and_stats():
    env = yaml_env(n_agents=2, n_stags=1, n_hare=1, world_shape=[3, 4])
    place(env, agents=[(0, 0), (2, 3)], stags=[(1, 1)], hares=[(0, 3)])
    assert env.render() == "0..h\n.S..\n...1"
    assert env.get_stats() == {"episodes": 0, "stags_caught": 0, "hares_caught": 0}
