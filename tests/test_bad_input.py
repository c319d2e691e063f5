"""Bad input gets one clear line and a non-zero exit: mistyped keys, wrong types, impossible settings,
unusable checkpoints, a replay buffer too large for the memory."""
import logging
import os
import shutil
import subprocess
from collections import namedtuple

import psutil
import pytest

import main
from main import InputError, check_settings, checked_params, env_factory
from main_runs import run_main
from components.episode_buffer import TENSOR_OVERHEAD_BYTES, ReplayBuffer
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
     "env_args.reward_win=[1] has the wrong type: expected float like the default 200.0, got list"),
    ("t_max=2.5", "t_max=2.5 must be a whole number like the default 10050000 (2e6 is fine, 2.5 is not)"),
    ("env_args.step_mul=8.5", "env_args.step_mul=8.5 must be a whole number like the default 8"),
    ("seed=abc", "seed='abc' has the wrong type: expected int"),
    ("agent_return_logits=True", "unknown config key 'agent_return_logits' (with agent_return_logits=True): a "
                                 "setting of PyMARL2's mlp agent, which marlkit does not ship yet"),
    ("agent_own_state_size=abc", "agent_own_state_size='abc' has the wrong type: expected bool or int, got str"),
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
    ("agent_own_state_size=4", "agent_own_state_size=4"),  # True (from the env) or a size
    ("agent_own_state_size=True", "agent_own_state_size=True"),
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
    ({"batch_size_run": 0}, "batch_size_run=0 must be at least 1"),
    ({"test_nepisode": -1}, "test_nepisode=-1 must be at least 1"),
    ({"t_max": 0}, "t_max=0 must be at least 1"),
    ({"rnn_hidden_dim": 0}, "rnn_hidden_dim=0 must be at least 1"),
    ({"env_worker_timeout": 0}, "env_worker_timeout=0 must be above 0"),
    ({"lr": 1e39}, "lr=1e+39 must be above 0 and at most 1.0"),
    ({"batch_size": 64, "buffer_size": 32}, "batch_size=64 is larger than buffer_size=32"),
    ({"gamma": 1.5}, "gamma=1.5 must be within [0.0, 1.0]"),
    ({"td_lambda": 1.5}, "td_lambda=1.5 must be within [0.0, 1.0]"),
    ({"epsilon_start": 1.5}, "epsilon_start=1.5 must be within [0.0, 1.0]"),
    ({"epsilon_finish": -0.1}, "epsilon_finish=-0.1 must be within [0.0, 1.0]"),
    ({"load_step": -1}, "load_step=-1 must be at least 0"),
    ({"seed": -1}, "seed=-1 must be within [0, 4294967295]"),
    ({"resume": True}, "resume=True needs checkpoint_path="),
    ({"use_rnn": False}, "use_rnn=False makes the rnn (or rnn_ns) agent feed-forward; agent n_rnn has no such setting"),
    ({"common_reward": False}, "common_reward=False (a reward per agent) needs a gymma task: sc2 gives one"),
    ({"reward_scalarisation": "max"}, "reward_scalarisation='max'; choose one of: sum, mean"),
    ({"resume": True, "checkpoint_path": "x", "evaluate": True}, "resume=True continues training;"),
    ({"absolute_metric": True}, "absolute_metric=True re-tests the best checkpoint of a run: give it with evaluate=True"),
    ({"absolute_metric": True, "evaluate": True}, "absolute_metric=True re-tests the best checkpoint of a run"),
    ({"absolute_metric": True, "evaluate": True, "checkpoint_path": "x", "load_step": 5},
     "absolute_metric=True picks the checkpoint itself"),
    ({"absolute_metric": True, "evaluate": True, "checkpoint_path": "x", "save_replay": True},
     "absolute_metric=True plays 10 x test_nepisode episodes: record replays with"),
])
def test_impossible_settings_are_rejected(qmix_sc2, updates, message):
    with pytest.raises(InputError) as error:
        check_settings(dict(qmix_sc2, **updates))
    assert str(error.value).startswith(message)


@pytest.mark.parametrize("argv, message, before_the_run", [
    (["batch_szie=8"], "main.py: error: unknown config key 'batch_szie' (with batch_szie=8); "
                       "did you mean 'batch_size'?", True),
    (["batch_size_run=abc"], "main.py: error: batch_size_run='abc' has the wrong type", True),
    (["batch_size=16", "buffer_size=8"], "main.py: error: batch_size=16 is larger than buffer_size=8", False),
    (["buffer_size=1000000000000", *SMALL[:4], "runner=episode", "batch_size_run=1"],
     "main.py: error: the replay buffer needs ", False),
])
def test_command_line_mistakes_give_one_line(tmp_path, argv, message, before_the_run):
    """Every mistake in one style and with one status, whether found before the run (the only line) or
    by the run (its last line, after the run's log); a run refused before it starts leaves no results
    folder (one refused by its set-up leaves its FAILED record)."""
    proc = run_main("--config=qmix", "--env-config=one_step_matrix_game", "with",
                    f"local_results_path={tmp_path}", *argv)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert lines[-1].startswith(message)
    if before_the_run:
        assert len(lines) == 1
    assert (tmp_path / "sacred").exists() == (message.startswith("main.py: error: the replay buffer"))


def bad_config_dir(tmp_path, name: str, text: str) -> str:
    """A copy of src/config with algs/<name>.yaml holding `text`."""
    import shutil
    folder = tmp_path / "config"
    shutil.copytree(main.CONFIG_DIR, folder)
    (folder / "algs" / f"{name}.yaml").write_text(text)
    return str(folder)


@pytest.mark.parametrize("text, message", [
    ("lr: 5e-4\n", "lr='5e-4' has the wrong type: expected float like the default 0.0005, got str; YAML reads 5e-4 "
                   "(no decimal point) as text: write it with one, e.g. 0.0005 (in src/config/algs/bad.yaml)"),
    ("mixing_embd_dim: 32\n", "unknown config key 'mixing_embd_dim' in src/config/algs/bad.yaml; did you mean "
                              "'mixing_embed_dim'? (new keys are declared in src/config/default.yaml)"),
    ("- lr: 0.1\n", "src/config/algs/bad.yaml must map config keys to values, but holds a list"),
    ("t_max: [1\n", "is not valid YAML"),
])
def test_config_files_are_checked_like_the_command_line(tmp_path, monkeypatch, capsys, text, message):
    monkeypatch.setattr(main, "CONFIG_DIR", bad_config_dir(tmp_path, "bad", text))
    assert main.main(["main.py", "--config=bad", "--env-config=sc2"]) == 2
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1


@pytest.mark.parametrize("argv, message", [
    (["with", "t_max", "20000"], "'t_max' after `with` is not KEY=VALUE (marlkit has no named configs); did you "
                                 "mean t_max=20000?"),
    (["with", "local_results_path=/proc/no/such/place"], "cannot write results to /proc/no/such/place/sacred/3m/"),
])
def test_more_command_line_mistakes_are_one_line(capsys, argv, message):
    assert main.main(["main.py", "--config=qmix", "--env-config=sc2", *argv]) == 2
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1


def test_checkpoint_without_models_gives_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    proc = run_main("--config=qmix", "--env-config=one_step_matrix_game", "with", f"local_results_path={tmp_path}",
                    "evaluate=True", f"checkpoint_path={tmp_path / 'empty'}", "runner=episode", "batch_size_run=1",
                    *SMALL)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"main.py: error: checkpoint_path '{tmp_path / 'empty'}' has no saved models (sub-folders named by t_env, "
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
    """3m with buffer_size 5000: 588 bytes per stored step and 3584 per episode (the overhead of its 7 tensors),
    0.20 GB if every episode lasts episode_limit (60) steps, 24 MB if every episode lasts one step; 1 GB of
    the available memory is kept free."""
    env = env_REGISTRY["sc2"](map_name="3m", backend="builtin")
    info = env.get_env_info()
    env.close()
    scheme, groups, preprocess = build_scheme(info)
    sizes = ReplayBuffer.storage_bytes(scheme, groups, preprocess)
    agents, actions = info["n_agents"], info["n_actions"]
    # float32 obs, state and reward, uint8 actions, bool avail_actions, terminated and filled
    assert sizes.step == 4 * (agents * info["obs_shape"] + info["state_shape"] + 1) + agents + agents * actions + 2
    assert (sizes.step, sizes.episode) == (588, 7 * TENSOR_OVERHEAD_BYTES)
    max_seq_length = info["episode_limit"] + 1
    logger = Logger(logging.getLogger("test_bad_input"))

    monkeypatch.setattr(psutil, "virtual_memory", lambda: FakeMemory(available=1_075_000_000))
    with pytest.raises(ValueError, match="^the replay buffer needs at least 23800000 bytes .0.02 GB. for "
                                         "buffer_size=5000 but only 1.07 GB of memory is available on cpu"):
        check_buffer_memory(5000, sizes, max_seq_length, "cpu", logger)

    monkeypatch.setattr(psutil, "virtual_memory", lambda: FakeMemory(available=1_100_000_000))
    with caplog.at_level(logging.INFO):
        check_buffer_memory(5000, sizes, max_seq_length, "cpu", logger)
    assert "Replay buffer: 5000 episodes, 588 bytes per stored step, at most 0.20 GB on cpu (1.10 GB available)" \
        in caplog.text
    assert ("the replay buffer may outgrow the memory: 0.20 GB if every episode reaches episode_limit=60; 5000 "
            "episodes fit on cpu while they average at most 1 steps") in caplog.text

    caplog.clear()
    monkeypatch.setattr(psutil, "virtual_memory", lambda: FakeMemory(available=2_000_000_000))
    with caplog.at_level(logging.INFO):
        check_buffer_memory(5000, sizes, max_seq_length, "cpu", logger)
    assert "0.20 GB on cpu (2.00 GB available)" in caplog.text and "outgrow" not in caplog.text


def test_a_damaged_pymarl2_checkpoint_is_one_line(tmp_path):
    """A models-only checkpoint (as PyMARL2 saves them) loaded without resume: every .th file is checked."""
    saved = tmp_path / "models" / "pymarl2_run" / "100"
    trained = run_main("--config=qmix", "--env-config=one_step_matrix_game", "with", f"local_results_path={tmp_path}",
                       "t_max=10", "save_model=True", "runner=episode", "batch_size_run=1", *SMALL)
    assert trained.returncode == 0, trained.stderr[-2000:]
    (token,) = os.listdir(tmp_path / "models")
    step = max(os.listdir(tmp_path / "models" / token), key=int)
    saved.mkdir(parents=True)
    for name in ("agent.th", "mixer.th", "opt.th"):  # PyMARL2's files only
        shutil.copy(tmp_path / "models" / token / step / name, saved / name)
    (saved / "mixer.th").write_bytes((saved / "mixer.th").read_bytes()[:200])  # truncated
    proc = run_main("--config=qmix", "--env-config=one_step_matrix_game", "with", f"local_results_path={tmp_path}",
                    "evaluate=True", f"checkpoint_path={saved.parent}", "runner=episode", "batch_size_run=1", *SMALL)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(f"main.py: error: no complete checkpoint in {saved.parent}: "
                                                           f"checkpoint {saved} is damaged: mixer.th cannot be read")


def test_a_full_disk_while_saving_is_one_line_and_leaves_no_partial_checkpoint(tmp_path):
    """Results on a tiny file system: the run stops with one line when a checkpoint no longer fits."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2M", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs here; tests/test_resume.py checks the same path with a failing write")
    try:
        proc = run_main("--config=qmix", "--env-config=one_step_matrix_game", "with", f"local_results_path={disk}",
                        "t_max=400", "save_model=True", "save_model_interval=1", "save_buffer=True", "runner=episode",
                        "batch_size_run=1", "use_cuda=False", "buffer_size=8", "batch_size=4")
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith("main.py: error: could not write checkpoint ") and "(No space left on device: " in last
        (token,) = os.listdir(disk / "models")
        assert all(name.isdigit() for name in os.listdir(disk / "models" / token))  # no temporary folder left
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)
