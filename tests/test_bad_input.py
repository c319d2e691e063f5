"""Bad input gets one clear line and a non-zero exit: mistyped keys, wrong types, impossible settings,
unusable checkpoints, a replay buffer too large for the memory."""
import logging
from collections import namedtuple

import psutil
import pytest

import main
from main import InputError, check_settings, checked_params, env_factory
from main_runs import run_main
from components.episode_buffer import ReplayBuffer
from envs import REGISTRY as env_REGISTRY
from run.run import build_scheme, check_buffer_memory
from run.checkpoint import CheckpointError, verify
from utils.config_check import UNPORTED_KEYS, UsageError, env_arg_kinds
from utils.logging import Logger

SMALL = ["use_cuda=False", "rnn_hidden_dim=8", "mixing_embed_dim=8", "hypernet_embed=8", "buffer_size=8",
         "batch_size=4"]


@pytest.fixture(scope="module")
def qmix_sc2():
    return main.build_config(["--config=qmix", "--env-config=sc2"])


def sc2_tokens(qmix_sc2, *tokens) -> list:
    """The `with` tokens as main.py hands them to sacred."""
    return checked_params(["main.py", "with", *tokens], qmix_sc2)[2:]


@pytest.mark.parametrize("token, message", [
    ("batch_szie=8", "unknown config key 'batch_szie' (with batch_szie=8); did you mean 'batch_size'?"),
    ("env_args.map_nme=3m",
     "unknown config key 'env_args.map_nme' (with env_args.map_nme='3m'); did you mean 'env_args.map_name'?"),
    ("zzzz=1", "unknown config key 'zzzz' (with zzzz=1); the known keys are in src/config/"),
    ("batch_size_run=abc", "batch_size_run='abc' has the wrong type: expected int like the default 8, got str"),
    ("use_cuda=1", "use_cuda=1 has the wrong type: expected bool like the default True, got int"),
    ("lr=fast", "lr='fast' has the wrong type: expected float like the default 0.001, got str"),
    ("env_args.reward_win=[1]",
     "env_args.reward_win=[1] has the wrong type: expected float like the default 200, got list"),
    ("t_max=2.5", "t_max=2.5 must be a whole number like the default 10050000 (2e6 is fine, 2.5 is not)"),
    ("env_args.step_mul=8.5", "env_args.step_mul=8.5 must be a whole number like the default 8"),
    ("seed=abc", "seed='abc' has the wrong type: expected int"),
    ("accumulated_episodes=4", "unknown config key 'accumulated_episodes' (with accumulated_episodes=4): not "
                               "supported: PyMARL2's run loop (ippo.yaml) skips the training step with it"),
    ("n_attention_head=4", "unknown config key 'n_attention_head' (with n_attention_head=4): a setting of "
                           "PyMARL2's Qatten, which marlkit does not ship yet"),
])
def test_bad_with_updates_are_rejected(qmix_sc2, token, message):
    with pytest.raises(UsageError) as error:
        sc2_tokens(qmix_sc2, token)
    assert str(error.value).startswith(message)


@pytest.mark.parametrize("token, sacred_token", [
    ("t_max=2e6", "t_max=2000000"),  # PyMARL scripts write step counts like this
    ("epsilon_anneal_time=5e5", "epsilon_anneal_time=500000"),
    ("env_args.difficulty=3", "env_args.difficulty='3'"),  # PyMARL2 passes it as a string
    ("env_args.game_version=4.10", "env_args.game_version='4.10'"),  # the text typed, not the float 4.1
    ("lr=1", "lr=1.0"),
    ("grad_norm_clip=0.5", "grad_norm_clip=0.5"),  # PyMARL2 writes 10: still a float key
    ("t_max=100", "t_max=100"),
    ("mixer=None", "mixer=None"),
    ("seed=3", "seed=3"),
    ("env_args.map_name=corridor", "env_args.map_name=corridor"),
    ("env_args.window_size_x=640", "env_args.window_size_x=640"),  # the constructor's argument, not in the YAML
    ("use_per=True", "use_per=True"),
])
def test_good_with_updates_pass_as_sacred_should_read_them(qmix_sc2, token, sacred_token):
    assert sc2_tokens(qmix_sc2, token) == [sacred_token]


def test_a_yaml_float_key_stays_float_when_a_later_file_writes_an_integer():
    config = main.build_config(["--config=qmix_large", "--env-config=sc2"])
    assert config["weight_decay"] == 0 and isinstance(config["weight_decay"], float)
    assert checked_params(["main.py", "with", "weight_decay=1e-4"], config)[2:] == ["weight_decay=1e-4"]


def test_env_arg_kinds_follow_the_constructors():
    kinds = env_arg_kinds(env_factory("sc2"))
    assert (kinds["map_name"], kinds["reward_win"], kinds["step_mul"], kinds["game_version"]) == (str, float, int, str)
    assert {"backend", "window_size_x"} <= set(kinds)
    assert {"world_shape", "prey_move_prob", "seed"} <= set(env_arg_kinds(env_factory("small_stag_hunt")))
    stag_hunt = env_arg_kinds(env_factory("stag_hunt"))
    assert (stag_hunt["world_shape"], stag_hunt["reward_stag"], stag_hunt["directed_exta_actions"]) == (tuple, float, bool)
    assert env_arg_kinds(env_factory("no_such_env")) is None


def test_unported_keys_are_not_config_keys():
    for alg in main.available_configs("algs"):
        config = main.build_config([f"--config={alg}", "--env-config=sc2"])
        assert not set(config) & set(UNPORTED_KEYS), alg


@pytest.mark.parametrize("updates, message", [
    ({"batch_size_run": 0}, "batch_size_run=0 must be above 0"),
    ({"test_nepisode": -1}, "test_nepisode=-1 must be above 0"),
    ({"env_worker_timeout": 0}, "env_worker_timeout=0 must be above 0"),
    ({"batch_size": 64, "buffer_size": 32}, "batch_size=64 is larger than buffer_size=32"),
    ({"gamma": 1.5}, "gamma=1.5 must be within [0, 1]"),
    ({"resume": True}, "resume=True needs checkpoint_path="),
    ({"resume": True, "checkpoint_path": "x", "evaluate": True}, "resume=True continues training;"),
])
def test_impossible_settings_are_rejected(qmix_sc2, updates, message):
    with pytest.raises(InputError) as error:
        check_settings(dict(qmix_sc2, **updates))
    assert str(error.value).startswith(message)


@pytest.mark.parametrize("argv, code, message", [
    (["batch_szie=8"], 2, "main.py: error: unknown config key 'batch_szie' (with batch_szie=8); "
                                  "did you mean 'batch_size'?"),
    (["batch_size_run=abc"], 2, "main.py: error: batch_size_run='abc' has the wrong type"),
    (["batch_size=16", "buffer_size=8"], 1, "InputError: batch_size=16 is larger than buffer_size=8"),
    (["buffer_size=1000000000000", *SMALL[:4], "runner=episode", "batch_size_run=1"], 1,
     "InputError: the replay buffer needs "),
])
def test_command_line_mistakes_give_one_line(tmp_path, argv, code, message):
    proc = run_main("--config=qmix", "--env-config=one_step_matrix_game", "with",
                    f"local_results_path={tmp_path}", *argv)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == code
    assert "Traceback" not in proc.stderr
    assert lines[-1].startswith(message)
    if code == 2:
        assert len(lines) == 1


def test_checkpoint_without_models_gives_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    proc = run_main("--config=qmix", "--env-config=one_step_matrix_game", "with", f"local_results_path={tmp_path}",
                    "evaluate=True", f"checkpoint_path={tmp_path / 'empty'}", "runner=episode", "batch_size_run=1",
                    *SMALL)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"InputError: checkpoint_path '{tmp_path / 'empty'}' has no saved models (sub-folders named by t_env, "
        f"written when save_model=True)")


def test_models_only_checkpoint_cannot_be_resumed(tmp_path):
    (tmp_path / "agent.th").write_bytes(b"")
    with pytest.raises(CheckpointError, match=f"^checkpoint {tmp_path} has no training_state.pt .* load it without "
                                              f"resume=True"):
        verify(str(tmp_path), need_state=True)
    with pytest.raises(CheckpointError, match=f"^checkpoint {tmp_path} is damaged: agent.th cannot be read"):
        verify(str(tmp_path), need_state=False)


FakeMemory = namedtuple("FakeMemory", "available")


def test_buffer_memory_check_warns_for_the_worst_case_and_stops_below_the_least(monkeypatch, caplog):
    """3m with buffer_size 5000: 588 bytes per stored step, 0.18 GB if every episode lasts episode_limit (60)
    steps, 5.9 MB if every episode lasts one step; 1 GB of the available memory is kept free."""
    env = env_REGISTRY["sc2"](map_name="3m", backend="builtin")
    info = env.get_env_info()
    env.close()
    scheme, groups, preprocess = build_scheme(info)
    sizes = ReplayBuffer.storage_bytes(scheme, groups, preprocess)
    agents, actions = info["n_agents"], info["n_actions"]
    # float32 obs, state and reward, uint8 actions, bool avail_actions, terminated and filled
    assert sizes.step == 4 * (agents * info["obs_shape"] + info["state_shape"] + 1) + agents + agents * actions + 2
    assert (sizes.step, sizes.episode) == (588, 0)
    max_seq_length = info["episode_limit"] + 1
    logger = Logger(logging.getLogger("test_bad_input"))

    monkeypatch.setattr(psutil, "virtual_memory", lambda: FakeMemory(available=1_075_000_000))
    with pytest.raises(ValueError, match="^the replay buffer needs at least 5880000 bytes .0.01 GB. for "
                                         "buffer_size=5000 but only 1.07 GB of memory is available on cpu"):
        check_buffer_memory(5000, sizes, max_seq_length, "cpu", logger)

    monkeypatch.setattr(psutil, "virtual_memory", lambda: FakeMemory(available=1_100_000_000))
    with caplog.at_level(logging.INFO):
        check_buffer_memory(5000, sizes, max_seq_length, "cpu", logger)
    assert "Replay buffer: 5000 episodes, 588 bytes per stored step, at most 0.18 GB on cpu (1.10 GB available)" \
        in caplog.text
    assert ("the replay buffer may outgrow the memory: 0.18 GB if every episode reaches episode_limit=60; 5000 "
            "episodes fit on cpu while they average at most 7 steps") in caplog.text

    caplog.clear()
    monkeypatch.setattr(psutil, "virtual_memory", lambda: FakeMemory(available=2_000_000_000))
    with caplog.at_level(logging.INFO):
        check_buffer_memory(5000, sizes, max_seq_length, "cpu", logger)
    assert "0.18 GB on cpu (2.00 GB available)" in caplog.text and "outgrow" not in caplog.text
