"""End to end: `python src/main.py ...` in subprocesses, with results in a temporary folder."""
import os
import re

import pytest
import sacred.dependencies
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from main_runs import MAIN, read_json, run_dir, run_main

SEED = 7
# Tiny networks and buffers: these runs check the wiring, not learning.
SMALL = ["use_cuda=False", "rnn_hidden_dim=8", "mixing_embed_dim=8", "hypernet_embed=8",
         "buffer_size=8", "batch_size=4"]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return str(tmp_path_factory.mktemp("results"))


@pytest.fixture(scope="module")
def parallel_training(results):
    """qmix with 2 parallel envs on the matrix game; tests and model saves every 20 env steps."""
    proc = run_main("--config=qmix", "--env-config=one_step_matrix_game", "with", f"seed={SEED}",
                    f"local_results_path={results}", "batch_size_run=2", "t_max=40", "test_interval=20",
                    "test_nepisode=2", "log_interval=20", "runner_log_interval=20", "learner_log_interval=20",
                    "use_tensorboard=True", "save_model=True", "save_model_interval=20", *SMALL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir(results, "one_step_matrix_game", "qmix_env=8_adam_td_lambda", 1)


def test_training_run_records_config_and_stats(parallel_training):
    config = read_json(parallel_training, "config.json")
    assert (config["seed"], config["env_args"]["seed"]) == (SEED, SEED)
    assert (config["runner"], config["batch_size_run"], config["t_max"]) == ("parallel", 2, 40)
    assert read_json(parallel_training, "run.json")["status"] == "COMPLETED"
    info = read_json(parallel_training, "info.json")
    assert config["env_seeds"] == [SEED, SEED + 1]
    assert info["test_return_mean_T"] == [2, 22, 42]  # one test right away, then every test_interval
    assert len(info["test_return_mean"]) == 3
    for key in ("return_mean", "ep_length_mean", "epsilon", "loss_td", "episode"):
        assert len(info[key]) == len(info[f"{key}_T"]) > 0, key
    assert info["ep_length_mean"][0] == 1.0  # one-step game
    # Each test round also keeps its per-episode returns (to 4 decimals), whose mean is the logged mean.
    episodes = info["test_episodes"]
    assert episodes["T"] == info["test_return_mean_T"] and set(episodes) == {"T", "return"}
    assert [len(returns) for returns in episodes["return"]] == [2, 2, 2]
    assert [sum(r) / 2 for r in episodes["return"]] == pytest.approx(info["test_return_mean"], abs=1e-4)


def test_the_git_record_is_sacreds_own(parallel_training):
    """main.py asks git once per repository (utils/sacred_git.py): each source's record is what sacred's own
    query answers for it."""
    query = sacred.dependencies.get_commit_if_possible
    url, commit, dirty = getattr(query, "__wrapped__", query)(MAIN, True)
    experiment = read_json(parallel_training, "run.json")["experiment"]
    assert len(experiment["sources"]) > 10
    expected = [] if url is None else [{"url": url, "commit": commit, "dirty": dirty}] * len(experiment["sources"])
    assert experiment["repositories"] == expected


def test_tensorboard_scalars_match_sacred(parallel_training, results):
    token_dirs = os.listdir(os.path.join(results, "tb_logs"))
    assert len(token_dirs) == 1 and token_dirs[0].startswith("qmix_env=8_adam_td_lambda__")
    events = EventAccumulator(os.path.join(results, "tb_logs", token_dirs[0]))
    events.Reload()
    assert {"test_return_mean", "return_mean", "loss_td", "epsilon"} <= set(events.Tags()["scalars"])
    scalars = events.Scalars("test_return_mean")
    info = read_json(parallel_training, "info.json")
    assert [s.step for s in scalars] == info["test_return_mean_T"]
    assert [s.value for s in scalars] == pytest.approx(info["test_return_mean"])


def test_evaluate_loads_the_closest_saved_model(parallel_training, results):
    models = os.path.join(results, "models")
    (token,) = os.listdir(models)
    assert sorted(int(step) for step in os.listdir(os.path.join(models, token))) == [2, 22, 42]
    proc = run_main("--config=qmix", "--env-config=one_step_matrix_game", "with", f"seed={SEED}",
                    f"local_results_path={results}", "runner=episode", "batch_size_run=1", "evaluate=True",
                    f"checkpoint_path={os.path.join(models, token)}", "load_step=20", "test_nepisode=3", *SMALL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"Loading model from {os.path.join(models, token, '22')}" in proc.stderr
    evaluation = run_dir(results, "one_step_matrix_game", "qmix_env=8_adam_td_lambda/eval", 1)
    assert read_json(evaluation, "config.json")["run_kind"] == "evaluate"  # apart from the training runs
    assert "Evaluation: 3 episodes at t_env 22: test_ep_length_mean 1, test_return_mean" in proc.stderr
    info = read_json(evaluation, "info.json")
    assert info["test_return_mean_T"] == [22]
    assert info["test_episodes"]["T"] == [22] and len(info["test_episodes"]["return"][0]) == 3
    assert "loss_td" not in info and "return_mean" not in info  # evaluation only, no training
    # The game is deterministic and testing is greedy: the loaded model plays as it did at t_env 22.
    trained = read_json(parallel_training, "info.json")
    assert info["test_return_mean"][0] == pytest.approx(trained["test_return_mean"][1])


def test_the_absolute_metric_retests_the_best_checkpoint_on_ten_times_the_episodes(parallel_training, results):
    models = os.path.join(results, "models")
    (token,) = os.listdir(models)
    proc = run_main("--config=qmix", "--env-config=one_step_matrix_game", "with", f"seed={SEED}",
                    f"local_results_path={results}", "batch_size_run=2", "evaluate=True", "absolute_metric=True",
                    f"checkpoint_path={os.path.join(models, token)}", "test_nepisode=2", *SMALL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    trained = read_json(parallel_training, "info.json")
    logged = dict(zip(trained["test_return_mean_T"], trained["test_return_mean"]))
    best = max([2, 22, 42], key=lambda step: (logged[step], -step))  # the earliest of equals
    evaluations = os.path.join(results, "sacred", "one_step_matrix_game", "qmix_env=8_adam_td_lambda", "eval")
    (info,) = [read_json(os.path.join(evaluations, run), "info.json") for run in os.listdir(evaluations)
               if run.isdigit() and read_json(os.path.join(evaluations, run), "config.json")["absolute_metric"]]
    assert info["absolute_metric"] == {"unique_token": token, "t_env": best, "selected_by": "test_return_mean",
                                       "logged_value": logged[best], "tested_at": best, "episodes": 20}
    assert info["test_episodes"]["T"] == [best] and len(info["test_episodes"]["return"][0]) == 20
    assert f"Evaluation: 20 episodes at t_env {best}: " in proc.stderr


def test_episode_runner_on_small_stag_hunt(tmp_path):
    proc = run_main("--config", "vdn", "--env-config", "small_stag_hunt", "with", f"local_results_path={tmp_path}",
                    f"seed={SEED}", "runner=episode", "batch_size_run=1", "t_max=60", "test_interval=50",
                    "test_nepisode=1", "buffer_size=4", "batch_size=2", *SMALL[:2])
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = run_dir(str(tmp_path), "small_stag_hunt", "vdn_env=8_adam_td_lambda", 1)
    info = read_json(folder, "info.json")
    # Episodes end early when every prey is caught, so the test steps depend on play; the rule does not:
    # a test after the first episode (at most episode_limit 25 steps), then one whenever 50 steps have passed.
    tests = info["test_return_mean_T"]
    assert tests[0] <= 25 and all(later - earlier >= 50 for earlier, later in zip(tests, tests[1:]))
    assert tests[-1] > 60 - 50  # the last test came no more than test_interval before t_max
    config = read_json(folder, "config.json")
    assert config["env_seeds"] == [config["seed"]]


@pytest.mark.parametrize("argv, message", [
    (["--config=qmx", "--env-config=sc2"], "unknown --config 'qmx'; available: coma, coma_epymarl, coma_ns, cw_qmix, dop, ia2c, ia2c_ns, ippo, ippo_epymarl, ippo_ns, iql, iql_epymarl, iql_ns, iql_td_lambda, lica, maa2c, maa2c_ns, maddpg, maddpg_ns, mappo, mappo_ns, mappo_smacv2, ow_qmix, pac, pac_dcg, pac_dcg_ns, pac_ns, qatten, qmix,"),
    (["--config=qmix", "--env-config=nope"], "unknown --env-config 'nope'; available: "),
    (["--env-config=sc2"], "missing --config=NAME; available: coma, coma_epymarl, coma_ns, cw_qmix, dop, ia2c, ia2c_ns, ippo, ippo_epymarl, ippo_ns, iql, iql_epymarl, iql_ns, iql_td_lambda, lica, maa2c, maa2c_ns, maddpg, maddpg_ns, mappo, mappo_ns, mappo_smacv2, ow_qmix, pac, pac_dcg, pac_dcg_ns, pac_ns, qatten, qmix,"),
])
def test_bad_config_names_give_one_line(argv, message):
    proc = run_main(*argv)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert message in proc.stderr


def test_checkpoint_step_picks_the_latest_or_the_closest(tmp_path):
    from run.run import checkpoint_step
    for step in ("10", "200", "3000"):
        (tmp_path / step).mkdir()
    (tmp_path / "notes").mkdir()
    assert checkpoint_step(str(tmp_path), 0) == 3000
    assert checkpoint_step(str(tmp_path), 150) == 200
    with pytest.raises(FileNotFoundError, match="is not a directory"):
        checkpoint_step(str(tmp_path / "missing"), 0)
    with pytest.raises(FileNotFoundError, match="has no saved models"):
        checkpoint_step(str(tmp_path / "notes"), 0)


@pytest.mark.parametrize("overrides, message", [
    (["env_args.map_name=4m"], "unknown map '4m'; known maps: 3m, 8m,"),
    (["env_args.backend=sc2", "env_args.map_name=3m"], "backend=sc2 needs StarCraft II with"),
    (["env_args.backend=gpu"], "unknown backend 'gpu'; choose one of: auto, sc2, builtin"),
])
def test_bad_smac_settings_give_one_line(tmp_path, overrides, message, monkeypatch):
    monkeypatch.setenv("SC2PATH", str(tmp_path / "no_game_here"))
    proc = run_main("--config=qmix", "--env-config=sc2", "with", f"local_results_path={tmp_path}", *overrides)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert message in proc.stderr.strip().splitlines()[-1]


def run_on_3m(tmp_path, monkeypatch, *overrides: str):
    """qmix on 3m of the built-in simulator (no StarCraft II under SC2PATH), small networks; must succeed."""
    monkeypatch.setenv("SC2PATH", str(tmp_path / "no_game_here"))
    proc = run_main("--config=qmix", "--env-config=sc2", "with", f"local_results_path={tmp_path}", *overrides, *SMALL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_smac_run_names_its_engine(tmp_path, monkeypatch):
    proc = run_on_3m(tmp_path, monkeypatch, "t_max=50", "runner=episode", "batch_size_run=1", "test_nepisode=1",
                     "use_tensorboard=True")
    assert "SMAC engine: builtin" in proc.stderr
    assert "no env_args.map_name given: playing 3m, the default of the env config" in proc.stderr
    folder = run_dir(str(tmp_path), "3m", "qmix_env=8_adam_td_lambda", 1)
    config, info = read_json(folder, "config.json"), read_json(folder, "info.json")
    assert config["env_args"]["backend"] == "builtin"
    # SMAC's test rounds keep each episode's battle_won beside its return.
    assert [won[0] for won in info["test_episodes"]["battle_won"]] == info["test_battle_won_mean"]
    (token,) = os.listdir(tmp_path / "tb_logs")
    assert token.startswith("qmix_env=8_adam_td_lambda_builtin__")


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_usage_and_the_configs(flag):
    proc = run_main(flag)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith("usage: main.py --config=ALG --env-config=ENV")
    assert "ALG: coma, coma_epymarl, coma_ns, cw_qmix, dop, ia2c, ia2c_ns, ippo, ippo_epymarl, ippo_ns, iql, iql_epymarl, iql_ns, iql_td_lambda, lica, maa2c, maa2c_ns, maddpg, maddpg_ns, mappo, mappo_ns, mappo_smacv2, ow_qmix, pac, pac_dcg, pac_dcg_ns, pac_ns, qatten, qmix," in proc.stdout and "stag_hunt" in proc.stdout


def test_unique_tokens_name_the_run_and_never_repeat():
    from run.run import unique_token
    config = {"name": "qmix", "env": "sc2", "env_args": {"backend": "builtin"}, "train_precision": "bfloat16"}
    tokens = {unique_token(config) for _ in range(20)}  # all within one second
    assert len(tokens) == 20 and all(re.fullmatch(r"qmix_builtin_bfloat16__\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_[0-9a-f]{6}", t)
                                     for t in tokens)
    assert unique_token({**config, "resume": True, "checkpoint_path": "results/models/qmix__old/", "load_step": 0}) \
        == "qmix__old"


def test_replays_of_parallel_envs_are_named_apart_and_listed(tmp_path, monkeypatch):
    proc = run_on_3m(tmp_path, monkeypatch, "evaluate=True", "save_replay=True", "batch_size_run=2", "test_nepisode=2",
                     "env_processes=workers")
    assert "save_replay=True: recording the 2 test episodes of 2 env(s)" in proc.stderr
    config = read_json(run_dir(str(tmp_path), "3m", "qmix_env=8_adam_td_lambda/eval", 1), "config.json")
    replays = sorted(os.listdir(tmp_path / "replays"))
    assert [name.split(config["unique_token"])[1][:5] for name in replays] == ["_env0", "_env1"]
    listed = next(line for line in proc.stderr.splitlines() if "Replays written (2): " in line)
    assert all(os.path.join(str(tmp_path), "replays", name) in listed for name in replays)


def test_the_best_checkpoint_is_scored_by_its_own_test_or_the_last_before_it(tmp_path):
    """Tests and saves drift apart when their intervals differ: a checkpoint is scored by the test logged at
    its t_env, else by the last one before it, and says which; of equal scores the earliest wins."""
    import torch as th

    from run import checkpoint
    from run.run import best_checkpoint

    info = {"test_return_mean": [1.0, 5.0, 3.0, 5.0], "test_return_mean_T": [10, 100, 200, 300]}
    for step in (10, 150, 200, 320):
        os.makedirs(tmp_path / str(step))
    th.save({"sacred_info": info, "unique_token": "run_a"}, tmp_path / "320" / checkpoint.TRAINING_STATE)
    # 150 is scored by the test of 100 (5.0), 320 by that of 300 (5.0): the earlier, 150, wins.
    assert best_checkpoint(str(tmp_path)) == (150, "test_return_mean", 5.0, 100, "run_a", 2)
    info["test_return_mean"][3] = 6.0
    th.save({"sacred_info": info}, tmp_path / "320" / checkpoint.TRAINING_STATE)
    assert best_checkpoint(str(tmp_path)) == (320, "test_return_mean", 6.0, 300, tmp_path.name, 1)  # token: folder
