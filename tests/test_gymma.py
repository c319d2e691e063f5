"""gymma: Gymnasium (LBF, RWARE), PettingZoo (MPE) and VMAS tasks with the real packages, as EPyMARL's wrapper
plays them, per-agent rewards (common_reward=False), and their command lines."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch as th

from envs.gymma import GymmaEnv, GymmaError
from main_runs import read_json, run_dir, run_main

LBF = "lbforaging:Foraging-8x8-2p-3f-v3"
RWARE = "rware:rware-tiny-2ag-v2"
SPREAD = "pz-mpe-simple-spread-v3"
ADVERSARY = "pz-mpe-simple-adversary-v3"
TAG = "pz-mpe-simple-tag-v3"
BALANCE = "vmas-balance"


def play(env: GymmaEnv, steps: int) -> list:
    """(observations, state, avail, reward, terminated, info) of `steps` steps of random available actions."""
    rng = np.random.default_rng(0)
    env.reset()
    trace = []
    for _ in range(steps):
        actions = [int(rng.choice(np.flatnonzero(env.get_avail_agent_actions(a)))) for a in range(env.n_agents)]
        reward, terminated, info = env.step(actions)
        trace.append((np.stack(env.get_obs()), env.get_state(), np.stack(env.get_avail_actions()), reward,
                      terminated, info))
        if terminated:
            env.reset()
    return trace


@pytest.mark.parametrize("key, info", [
    (LBF, {"state_shape": 30, "obs_shape": 15, "n_actions": 6, "n_agents": 2, "episode_limit": 50}),
    (RWARE, {"state_shape": 142, "obs_shape": 71, "n_actions": 5, "n_agents": 2, "episode_limit": 50}),
    (SPREAD, {"state_shape": 54, "obs_shape": 18, "n_actions": 5, "n_agents": 3, "episode_limit": 50}),
    (BALANCE, {"state_shape": 48, "obs_shape": 16, "n_actions": 9, "n_agents": 3, "episode_limit": 50}),
])
def test_each_family_gives_smac_shaped_env_info(key, info):
    env = GymmaEnv(key=key, time_limit=50, seed=1)
    assert env.get_env_info() == info
    observations, state = env.reset()
    assert len(observations) == info["n_agents"] and observations[0].dtype == np.float32
    # The state is the agents' observations joined, agent 0 first (EPyMARL's gymma).
    np.testing.assert_array_equal(state, np.concatenate(observations))
    env.close()


def test_observations_of_different_sizes_are_zero_padded():
    """simple_adversary: the adversary sees 8 numbers, the good agents 10."""
    env = GymmaEnv(key=ADVERSARY, time_limit=25, seed=1)
    observations, _ = env.reset()
    assert env.get_obs_size() == 10 and env.get_state_size() == 30
    assert observations[0][8:].tolist() == [0.0, 0.0] and np.any(observations[1][8:] != 0)


@pytest.mark.parametrize("key, steps", [(LBF, 120), (BALANCE, 30)])
def test_the_same_seed_plays_the_same_episodes(key, steps):
    first, second = (play(GymmaEnv(key=key, time_limit=50, seed=3), steps) for _ in range(2))
    other = play(GymmaEnv(key=key, time_limit=50, seed=4), steps)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a[0], b[0])
        assert a[3:] == b[3:]
    assert any(not np.array_equal(a[0], b[0]) for a, b in zip(first, other))


def test_the_time_limit_cuts_the_episode_as_terminal_unless_asked_to_bootstrap():
    """EPyMARL stores the last step of an episode cut at time_limit as terminal; bootstrap_time_limit
    tells the learner (info["episode_limit"]) to bootstrap there instead."""
    trace = play(GymmaEnv(key=SPREAD, time_limit=7, seed=0), 7)
    assert [step[4] for step in trace] == [False] * 6 + [True] and trace[-1][5] == {}
    trace = play(GymmaEnv(key=SPREAD, time_limit=7, seed=0, bootstrap_time_limit=True), 7)
    assert [step[4] for step in trace] == [False] * 6 + [True] and trace[-1][5] == {"episode_limit": True}


def test_the_last_step_of_a_pettingzoo_episode_keeps_its_rewards():
    """MPE retires every agent at max_cycles; that step's rewards count (EPyMARL's wrapper zeroes them)."""
    trace = play(GymmaEnv(key=SPREAD, time_limit=100, seed=0, max_cycles=5), 5)
    assert trace[-1][4] and trace[-1][3] < 0


def test_an_episode_the_env_ends_itself_is_terminal():
    """LBF ends its episodes after its own 50 steps as terminated (not truncated): no bootstrap."""
    trace = play(GymmaEnv(key=LBF, time_limit=100, seed=0), 50)
    ends = [i for i, step in enumerate(trace) if step[4]]
    assert ends and all(trace[i][5] == {} for i in ends)


def test_rewards_are_summed_or_averaged_into_the_teams():
    summed = play(GymmaEnv(key=SPREAD, time_limit=25, seed=2), 25)
    averaged = play(GymmaEnv(key=SPREAD, time_limit=25, seed=2, reward_scalarisation="mean"), 25)
    # simple_spread gives each of its 3 agents the same shared reward (plus collision penalties).
    assert [step[3] for step in summed] == pytest.approx([3 * step[3] for step in averaged])
    assert all(step[3] < 0 for step in summed)


class RetiringEnv:
    """A PettingZoo parallel env whose agent "b" leaves after the first step; "a" plays on for 3."""

    possible_agents = ["a", "b"]

    def __init__(self):
        from gymnasium.spaces import Box, Discrete

        self.spaces = (Box(-1, 1, (2,)), Discrete(3))
        self.sent = []

    def observation_space(self, agent):
        return self.spaces[0]

    def action_space(self, agent):
        return self.spaces[1]

    def reset(self, seed=None):
        self.t, self.agents = 0, list(self.possible_agents)
        return {agent: np.zeros(2, np.float32) for agent in self.agents}, {}

    def step(self, actions):
        self.sent.append(dict(actions))
        self.t += 1
        done = {agent: agent == "b" or self.t == 3 for agent in self.agents}
        observations = {agent: np.full(2, self.t, np.float32) for agent in self.agents}
        rewards = {agent: 1.0 for agent in self.agents}
        self.agents = [agent for agent in self.agents if not done[agent]]
        return observations, rewards, done, {agent: False for agent in done}, {}

    def close(self):
        pass


def test_an_agent_a_pettingzoo_env_retires_keeps_its_observation_and_may_only_take_action_0(monkeypatch):
    fake = RetiringEnv()
    monkeypatch.setattr("envs.gymma.importlib.import_module", lambda name: SimpleNamespace(parallel_env=lambda: fake))
    env = GymmaEnv(key="pz-fake-retiring-v0", time_limit=10)
    env.reset()
    assert env.step([1, 2]) == (2.0, False, {})
    assert env.get_avail_agent_actions(1).tolist() == [1, 0, 0] and env.get_obs_agent(1).tolist() == [1.0, 1.0]
    assert env.step([2, 0]) == (1.0, False, {})
    assert fake.sent[-1] == {"a": 2}  # the retired agent's action is not sent
    assert env.step([0, 0])[1] is True


def test_without_common_reward_each_agent_gets_its_own():
    env = GymmaEnv(key=LBF, time_limit=50, seed=5, common_reward=False)
    team = GymmaEnv(key=LBF, time_limit=50, seed=5)
    for env_step, team_step in zip(play(env, 200), play(team, 200)):
        assert env_step[3].shape == (2,) and env_step[3].dtype == np.float32
        assert float(env_step[3].sum()) == pytest.approx(team_step[3])
    assert any(step[3][0] != step[3][1] for step in play(env, 400))  # LBF pays whoever loads the food


def test_unavailable_actions_and_wrong_counts_are_refused():
    env = GymmaEnv(key=LBF, time_limit=50, seed=0)
    env.reset()
    with pytest.raises(ValueError, match="expected one per agent"):
        env.step([0])
    with pytest.raises(ValueError, match="cannot take action 6"):
        env.step([6, 0])


@pytest.mark.parametrize("kwargs, message", [
    ({}, "gymma needs env_args.key"),
    ({"key": "lbforaging:Foraging-8x8-2p-3f-v9"}, r"names no env \(Environment version `v9` .*did you mean "
                                                   "Foraging-8x8-2p-3f-v3"),
    ({"key": "pz-mpe-simple-sprad-v3"}, "names no env .*did you mean pz-mpe-simple-spread-v3"),
    ({"key": "nosuchpackage:Env-v0"}, "needs the package 'nosuchpackage', which is not installed"),
    ({"key": "pz-mpe"}, "a PettingZoo key reads pz-<family>-<env-name>"),
    ({"key": "vmas-balanse"}, r"names no env \(VMAS has no scenario 'balanse'\); did you mean vmas-balance"),
    ({"key": SPREAD, "reward_scalarisation": "max"}, "reward_scalarisation='max'; choose one of: sum, mean"),
    ({"key": ADVERSARY, "pretrained_wrapper": "PretrainedAdversary"},
     r"give its weights as env_args.pretrained_params=PATH \(EPyMARL ships them .*adv_params.pt"),
    ({"key": TAG, "pretrained_wrapper": "FrozenPrey"}, "EPyMARL's are FrozenTag, RandomTag, PretrainedTag"),
    ({"key": TAG, "pretrained_wrapper": "PretrainedTag", "pretrained_params": "/no/such/file.pt"},
     "cannot read PretrainedTag's policy from it"),
    ({"key": LBF, "pretrained_wrapper": "FrozenTag"},
     "plays an agent of MPE's pz-mpe-simple-tag-v3, not of lbforaging:Foraging-8x8-2p-3f-v3"),
])
def test_bad_env_args_raise_one_line(kwargs, message):
    with pytest.raises(GymmaError, match=message) as error:
        GymmaEnv(**kwargs)
    assert "\n" not in str(error.value)


def epymarl_style_policy(obs_size: int, hidden: int, seed: int) -> th.nn.Module:
    """A network of EPyMARL's pretrained actors' shape (envs/pretrained/ddpg.py: BatchNorm1d, then three
    layers), random weights and running statistics, in eval mode."""
    th.manual_seed(seed)
    policy = th.nn.Module()
    policy.in_fn = th.nn.BatchNorm1d(obs_size)
    policy.fc1, policy.fc2, policy.fc3 = (th.nn.Linear(obs_size, hidden), th.nn.Linear(hidden, hidden),
                                          th.nn.Linear(hidden, 5))
    with th.no_grad():
        policy.in_fn.running_mean.normal_()
        policy.in_fn.running_var.uniform_(0.5, 2.0)
        policy.in_fn.weight.normal_()
    return policy.eval()


def policy_action(policy: th.nn.Module, observation) -> int:
    with th.no_grad():
        x = policy.in_fn(th.as_tensor(observation, dtype=th.float32).unsqueeze(0))
        return int(policy.fc3(th.relu(policy.fc2(th.relu(policy.fc1(x))))).argmax())


@pytest.mark.parametrize("key, wrapper, fixed, obs_size, learners", [
    (TAG, "PretrainedTag", -1, 14, 3), (ADVERSARY, "PretrainedAdversary", 0, 8, 2)])
def test_a_pretrained_wrapper_plays_its_agent_with_the_saved_policy_and_drops_it_from_the_team(
        tmp_path, key, wrapper, fixed, obs_size, learners):
    """The weights file as EPyMARL saves its (a dict whose agent_params list holds each agent's {"policy": state
    dict}); the fixed agent takes the network's argmax action on its own observation at every step."""
    policies = [epymarl_style_policy(obs_size, 16, seed) for seed in range(2)]
    path = tmp_path / "params.pt"
    th.save({"agent_params": [{"policy": policy.state_dict()} for policy in policies]}, path)
    env = GymmaEnv(key=key, time_limit=25, pretrained_wrapper=wrapper, pretrained_params=str(path), seed=1)
    full = GymmaEnv(key=key, time_limit=25, seed=1)
    assert env.n_agents == learners == full.n_agents - 1
    played = policies[fixed]  # EPyMARL's entry: the prey's is the last, the adversary's the first
    rng = np.random.default_rng(0)
    env.reset()
    full.reset()
    for _ in range(25):
        fixed_observation = full.get_obs_agent(fixed % full.n_agents)[:obs_size]
        assert np.allclose(env.task.fixed_observation, fixed_observation)
        actions = [int(rng.integers(5)) for _ in range(env.n_agents)]
        full_actions = list(actions)
        full_actions.insert(fixed % full.n_agents, policy_action(played, fixed_observation))
        _, terminated, _ = env.step(actions)
        full.step(full_actions)
        learner_ids = [a for a in range(full.n_agents) if a != fixed % full.n_agents]
        assert np.allclose(np.stack(env.get_obs()), np.stack(full.get_obs())[learner_ids][:, :env.get_obs_size()])
        if terminated:
            break


def test_frozen_and_random_tag_play_the_prey_without_weights():
    frozen = GymmaEnv(key=TAG, time_limit=10, pretrained_wrapper="FrozenTag", seed=1)
    frozen.reset()
    assert frozen.n_agents == 3 and [frozen.task.choose(None) for _ in range(3)] == [0, 0, 0]
    draws = []
    for _ in range(2):
        env = GymmaEnv(key=TAG, time_limit=10, pretrained_wrapper="RandomTag", seed=4)
        draws.append([env.task.choose(None) for _ in range(20)])
    assert draws[0] == draws[1] and len(set(draws[0])) > 2 and all(0 <= a < 5 for a in draws[0])


def test_weights_for_another_agent_or_not_a_policy_are_refused_in_one_line(tmp_path):
    path = tmp_path / "params.pt"
    th.save({"agent_params": [{"policy": epymarl_style_policy(9, 8, 0).state_dict()}]}, path)
    with pytest.raises(GymmaError, match="the policy reads 9 observation values, the agent it plays sees 14") as error:
        GymmaEnv(key=TAG, pretrained_wrapper="PretrainedTag", pretrained_params=str(path))
    assert "\n" not in str(error.value)
    th.save({"agent_params": [SimpleNamespace(policy=1)]}, path)  # not loadable with weights_only
    with pytest.raises(GymmaError, match="cannot read PretrainedTag's policy from it") as error:
        GymmaEnv(key=TAG, pretrained_wrapper="PretrainedTag", pretrained_params=str(path))
    assert "\n" not in str(error.value)


def test_a_pretrained_wrapper_trains_from_the_command_line(tmp_path):
    proc = run_main("--config=qmix", "--env-config=gymma", "with", f"env_args.key={TAG}", "env_args.time_limit=25",
                    "env_args.pretrained_wrapper=FrozenTag", "t_max=100", "batch_size_run=1", "runner=episode",
                    "buffer_size=8", "batch_size=2", "test_nepisode=2", "test_interval=50", "log_interval=50",
                    "env_processes=main", f"local_results_path={tmp_path}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    config = read_json(run_dir(str(tmp_path), TAG, "qmix_env=8_adam_td_lambda", 1), "config.json")
    assert config["env_args"]["pretrained_wrapper"] == "FrozenTag"


@pytest.mark.parametrize("key", [LBF, pytest.param(RWARE, marks=pytest.mark.slow),
                                 pytest.param(SPREAD, marks=pytest.mark.slow), BALANCE])
def test_qmix_trains_on_each_family_from_the_command_line(tmp_path, key):
    """In env workers (auto steps these tasks in the main process, as the README commands' test does, every
    family). The workers' path is the same for every family: LBF and VMAS (torch in the workers) by default,
    RWARE and MPE in the slow set."""
    proc = run_main("--config=qmix", "--env-config=gymma", "with", f"env_args.key={key}", "env_args.time_limit=25",
                    "t_max=120", "batch_size_run=2", "buffer_size=8", "batch_size=4", "test_nepisode=2",
                    "test_interval=50", "log_interval=50", "env_processes=workers", f"local_results_path={tmp_path}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = run_dir(str(tmp_path), key.split(":")[-1], "qmix_env=8_adam_td_lambda", 1)  # the key without package:
    config, info = read_json(folder, "config.json"), read_json(folder, "info.json")
    assert config["env_args"]["common_reward"] is True and config["env_args"]["reward_scalarisation"] == "sum"
    assert info["test_ep_length_mean"][0] <= 25 and "loss_td" in info


def test_mappo_trains_on_each_agents_own_reward_and_logs_epymarls_stats(tmp_path):
    """The issue's EPyMARL command (shortened): per-agent rewards through runner, buffer and learner."""
    proc = run_main("--config=mappo", "--env-config=gymma", "with", "env_args.time_limit=50", f"env_args.key={LBF}",
                    "common_reward=False", "t_max=400", "batch_size_run=2", "buffer_size=2", "batch_size=2",
                    "test_nepisode=2", "test_interval=200", "log_interval=200", "runner_log_interval=200",
                    f"local_results_path={tmp_path}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = read_json(run_dir(str(tmp_path), LBF.split(":")[-1], "mappo", 1), "info.json")
    for key in ("agent_0_return_mean", "agent_1_return_std", "total_return_mean", "test_total_return_mean",
                "critic_loss", "pg_loss"):
        assert info[key] and np.all(np.isfinite(info[key])), key
    assert "return_mean" not in info
    assert info["total_return_mean"] == pytest.approx(
        [a + b for a, b in zip(info["agent_0_return_mean"], info["agent_1_return_mean"])])


@pytest.mark.parametrize("config, env, overrides, message", [
    ("qmix", "gymma", ["env_args.key=pz-mpe-simple-sprad-v3"],
     "main.py: error: env_args.key='pz-mpe-simple-sprad-v3' names no env"),
    ("qmix", "gymma", [f"env_args.key={SPREAD}", "common_reward=False"],
     "main.py: error: common_reward=False (a reward per agent): nq_learner trains on one team reward; the learners"),
    ("mappo", "sc2", ["common_reward=False"], "main.py: error: common_reward=False (a reward per agent) needs a gymma "
                                              "task: sc2 gives one team reward"),
    ("mappo", "gymma", [f"env_args.key={SPREAD}", "reward_scalarisation=max"],
     "main.py: error: reward_scalarisation='max'; choose one of: sum, mean"),
])
def test_bad_gymma_settings_give_one_line_before_any_worker_starts(tmp_path, config, env, overrides, message):
    proc = run_main(f"--config={config}", f"--env-config={env}", "with", *overrides, f"local_results_path={tmp_path}")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(message)
