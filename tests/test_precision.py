"""train_precision: float32 (PyMARL2's arithmetic) by default on every CPU; bfloat16 and auto opt-in and
recorded (config.json, run name, checkpoint); a resumed run keeps its checkpoint's precision unless the
command line gives one, and says so."""
import logging
import os

import pytest
import torch as th

import main
from main_runs import read_json, run_dir, run_main
from run import checkpoint
from utils import th_utils

TINY = ["use_cuda=False", "rnn_hidden_dim=8", "mixing_embed_dim=8", "hypernet_embed=8", "buffer_size=8",
        "batch_size=4", "batch_size_run=2", "test_interval=20", "test_nepisode=2", "log_interval=20",
        "runner_log_interval=20", "learner_log_interval=20", "save_model=True", "save_model_interval=20"]


@pytest.fixture
def bf16_cpu(monkeypatch):
    """A CPU with native bfloat16 instructions, whatever this one has."""
    monkeypatch.setattr(th_utils, "cpu_bf16_flag", lambda: "avx512_bf16")


@pytest.fixture
def command_line(monkeypatch):
    keys = set()
    monkeypatch.setattr(main, "COMMAND_LINE_KEYS", keys)
    return keys


def resolved(config_updates: dict) -> str:
    config = main.build_config(["--config=qmix", "--env-config=one_step_matrix_game"])
    config.update(use_cuda=False, **config_updates)
    return main.training_precision(config, logging.getLogger("test_precision"))


def test_the_default_resolves_to_float32_on_a_cpu_with_bfloat16(bf16_cpu, command_line):
    assert resolved({}) == "float32"
    assert resolved({"train_precision": "bfloat16"}) == "bfloat16"


def test_auto_is_opt_in_and_says_what_it_chose(bf16_cpu, command_line, caplog):
    with caplog.at_level(logging.INFO):
        assert resolved({"train_precision": "auto"}) == "bfloat16"
    assert "train_precision=auto resolves to bfloat16 (auto: this CPU has avx512_bf16)" in caplog.text


def test_auto_stays_float32_without_native_bfloat16(monkeypatch, command_line):
    monkeypatch.setattr(th_utils, "cpu_bf16_flag", lambda: None)
    assert resolved({"train_precision": "auto"}) == "float32"


def saved_checkpoint(folder, precision) -> str:
    step = folder / "models" / "token" / "10"
    step.mkdir(parents=True)
    th.save({"train_precision": precision} if precision else {}, step / checkpoint.TRAINING_STATE)
    return str(step.parent)


@pytest.mark.parametrize("saved, on_command_line, expected", [
    ("bfloat16", None, "bfloat16"),          # keeps the checkpoint's
    ("bfloat16", "float32", "float32"),      # unless the command line says otherwise
    ("float32", None, "float32"),
    (None, None, "float32"),                 # older checkpoints record none: the config's
])
def test_a_resumed_run_keeps_its_checkpoints_precision(tmp_path, command_line, bf16_cpu, saved, on_command_line,
                                                        expected, caplog):
    updates = {"resume": True, "checkpoint_path": saved_checkpoint(tmp_path, saved)}
    if on_command_line:
        command_line.add("train_precision")
        updates["train_precision"] = on_command_line
    with caplog.at_level(logging.INFO):
        assert resolved(updates) == expected
    assert ("the precision the resumed checkpoint was trained in" in caplog.text) == (saved == "bfloat16"
                                                                                       and not on_command_line)


def test_bfloat16_is_recorded_and_kept_on_resume(tmp_path):
    """End to end: config.json, the unique_token and the checkpoint record bfloat16; resuming without
    train_precision goes on in bfloat16 and says so."""
    common = ["--config=qmix", "--env-config=one_step_matrix_game", "with", "seed=3",
              f"local_results_path={tmp_path}", *TINY]
    first = run_main(*common, "t_max=40", "train_precision=bfloat16")
    assert first.returncode == 0, first.stderr[-3000:]
    (token,) = os.listdir(tmp_path / "models")
    assert token.startswith("qmix_env=8_adam_td_lambda_bfloat16__")
    first_config = read_json(run_dir(str(tmp_path), "one_step_matrix_game", "qmix_env=8_adam_td_lambda", 1),
                             "config.json")
    assert first_config["train_precision"] == "bfloat16"
    assert "Training step matmuls in bfloat16" in first.stderr

    second = run_main(*common, "t_max=60", f"checkpoint_path={tmp_path / 'models' / token}", "resume=True")
    assert second.returncode == 0, second.stderr[-3000:]
    config = read_json(run_dir(str(tmp_path), "one_step_matrix_game", "qmix_env=8_adam_td_lambda", 2), "config.json")
    assert config["train_precision"] == "bfloat16"
    assert "training goes on in bfloat16, the precision the checkpoint was trained in" in second.stderr

    third = run_main(*common, "t_max=80", f"checkpoint_path={tmp_path / 'models' / token}", "resume=True",
                     "train_precision=float32")
    assert third.returncode == 0, third.stderr[-3000:]
    config = read_json(run_dir(str(tmp_path), "one_step_matrix_game", "qmix_env=8_adam_td_lambda", 3), "config.json")
    assert config["train_precision"] == "float32"
    assert "training goes on in float32 as the command line says; the checkpoint was trained in bfloat16" \
        in third.stderr


def test_a_float32_run_records_float32_and_keeps_its_name(tmp_path):
    result = run_main("--config=qmix", "--env-config=one_step_matrix_game", "with", f"local_results_path={tmp_path}",
                      "t_max=20", *TINY)
    assert result.returncode == 0, result.stderr[-3000:]
    config = read_json(run_dir(str(tmp_path), "one_step_matrix_game", "qmix_env=8_adam_td_lambda", 1), "config.json")
    assert config["train_precision"] == "float32" and not config["tune_learner_threads"]
    (token,) = os.listdir(tmp_path / "models")
    assert token.startswith("qmix_env=8_adam_td_lambda__")
