"""Checkpoints and resume: atomic saves, damaged checkpoints, exact continuation, continuous curves."""
import copy
import errno
import json
import logging
import os
import random
import shutil
from types import SimpleNamespace

import numpy as np
import pytest
import torch as th
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from main import build_config
from main_runs import read_json, run_dir, run_main
from run import checkpoint
from envs.starcraft.interface.backend import builtin_sources_digest
from run.run import TrainingLoop, args_sanity_check, check_same_simulator, select_resume_checkpoint, setup_learning
from runners import REGISTRY as r_REGISTRY
from utils.logging import Logger

th.set_num_threads(1)

SMALL = {"use_cuda": False, "rnn_hidden_dim": 8, "mixing_embed_dim": 8, "hypernet_embed": 8, "buffer_size": 8,
         "batch_size": 4, "target_update_interval": 7}
LOG = logging.getLogger("test_resume")


def make_args(results: str, **overrides) -> SimpleNamespace:
    """The merged config of qmix on the matrix game with the episode runner, as main.py builds it."""
    config = build_config(["main.py", "--config=qmix", "--env-config=one_step_matrix_game"])
    config.update(SMALL, seed=5, env_args=dict(config["env_args"], seed=5), runner="episode", batch_size_run=1,
                  local_results_path=results, save_model=True, save_model_interval=10, save_buffer=True,
                  test_interval=10, log_interval=10, runner_log_interval=10, learner_log_interval=10, t_max=30)
    config.update(overrides)
    args = SimpleNamespace(**args_sanity_check(config, LOG))
    args.device = "cpu"
    args.unique_token = "token"
    return args


def make_loop(args: SimpleNamespace) -> TrainingLoop:
    logger = Logger(LOG)
    logger.sacred_info, logger.use_sacred = {}, True  # what setup_sacred does with a sacred run
    runner = r_REGISTRY[args.runner](args=args, logger=logger)
    buffer, learner = setup_learning(args, runner, logger)
    return TrainingLoop(args, runner, buffer, learner, logger)


def scramble_rngs() -> None:
    random.seed(123)
    np.random.seed(123)
    th.manual_seed(123)


def tensors_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(th.equal(a[key], b[key]) for key in a)


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """A training loop that ran to t_max (t_env 31) and saved its checkpoints, and the RNG states at the stop."""
    results = str(tmp_path_factory.mktemp("results"))
    th.manual_seed(5)
    loop = make_loop(make_args(results))
    loop.run()
    rngs = checkpoint.rng_states()
    yield loop, rngs
    loop.runner.close_env()


def network(loop: TrainingLoop, name: str) -> th.nn.Module:
    """loop.learner.<name>, e.g. name "target_mac.agent"."""
    module = loop.learner
    for part in name.split("."):
        module = getattr(module, part)
    return module


def resumed_loop(stopped_loop: TrainingLoop, **overrides) -> tuple:
    args = make_args(stopped_loop.args.local_results_path, resume=True, t_max=60,
                     checkpoint_path=os.path.join(stopped_loop.args.local_results_path, "models", "token"), **overrides)
    point = select_resume_checkpoint(args, LOG)
    args.env_seed_generation = point.state["runner"]["seed_generation"] + 1
    scramble_rngs()
    loop = make_loop(args)
    loop.resume(point)
    return loop, point


def test_checkpoints_are_written_whole(stopped):
    loop, _ = stopped
    folder = os.path.join(loop.args.local_results_path, "models", "token")
    assert sorted(os.listdir(folder)) == ["1", "11", "21", "31"]  # no temporary folder left
    assert sorted(os.listdir(os.path.join(folder, "31"))) == ["agent.th", "buffer.pt", "checksums.json", "mixer.th",
                                                                "opt.th", "target", "training_state.pt"]
    state = checkpoint.load_file(os.path.join(folder, "31"), checkpoint.TRAINING_STATE)
    assert (state["runner"]["t_env"], state["episode"]) == (31, 31)
    assert state["files"] == ["agent.th", "mixer.th", "opt.th", "target/agent.th", "target/mixer.th", "buffer.pt"]


def test_resume_restores_the_state_at_the_stop(stopped):
    a, rngs_at_stop = stopped
    b, point = resumed_loop(a)
    try:
        assert point.step == 31
        assert (b.runner.t_env, b.episode) == (a.runner.t_env, a.episode) == (31, 31)
        assert (b.last_test_t, b.last_log_t, b.model_save_t) == (a.last_test_t, a.last_log_t, a.model_save_t)
        assert b.learner.state_dict() == a.learner.state_dict()
        for name in ("mac.agent", "target_mac.agent", "mixer", "target_mixer"):
            assert tensors_equal(network(b, name).state_dict(), network(a, name).state_dict()), name
        assert not tensors_equal(a.learner.mac.agent.state_dict(), a.learner.target_mac.agent.state_dict())
        opt_a, opt_b = a.learner.optimiser.state_dict(), b.learner.optimiser.state_dict()
        assert opt_a["param_groups"] == opt_b["param_groups"]
        for key, moments in opt_a["state"].items():
            assert tensors_equal(moments, opt_b["state"][key])
        assert (b.buffer.buffer_index, b.buffer.episodes_in_buffer) == (a.buffer.buffer_index, 8)
        # Sampling all 8 stored episodes draws no random numbers and returns them in slot order.
        assert tensors_equal(b.buffer.sample(8).data.transition_data, a.buffer.sample(8).data.transition_data)
        now = checkpoint.rng_states()
        assert now["python"] == rngs_at_stop["python"] and now["numpy"] == rngs_at_stop["numpy"]
        assert th.equal(now["torch"], rngs_at_stop["torch"])
        assert b.logger.sacred_info == a.logger.sacred_info
        # The next gradient step is the same as the stopped run's would have been.
        b.learn()
        checkpoint.set_rng_states(rngs_at_stop)
        a.learn()
        assert tensors_equal(b.learner.mac.agent.state_dict(), a.learner.mac.agent.state_dict())
        # Epsilon follows t_env: the first resumed episode explores with the schedule's value at t_env 31.
        b.runner.run(test_mode=False)
        schedule = b.learner.mac.action_selector.schedule
        assert b.learner.mac.action_selector.epsilon == pytest.approx(schedule.eval(31)) != schedule.eval(0)
        assert b.runner.env_seeds == [5 + 1]  # a new seed generation: no replay of the stopped run's episodes
    finally:
        b.runner.close_env()


def test_resume_removes_what_a_process_that_died_while_saving_left(stopped, caplog):
    folder = os.path.join(stopped[0].args.local_results_path, "models", "token")
    os.makedirs(os.path.join(folder, ".41.tmp-999999999"))  # a power loss while saving t_env 41
    with caplog.at_level(logging.WARNING):
        b, _ = resumed_loop(stopped[0])
    b.runner.close_env()
    assert sorted(os.listdir(folder)) == ["1", "11", "21", "31"]
    assert "removed .41.tmp-999999999, a checkpoint that a process which died while saving left unfinished" in caplog.text


def test_resume_with_save_buffer_off_does_not_load_the_buffer(stopped, caplog):
    with caplog.at_level(logging.WARNING):
        b, _ = resumed_loop(stopped[0], save_buffer=False)
    try:
        assert b.buffer.episodes_in_buffer == 0 and b.runner.t_env == 31
        assert "save_buffer=False: the checkpoint's replay buffer is not loaded" in caplog.text
    finally:
        b.runner.close_env()


def test_damaged_newest_checkpoint_falls_back_with_a_warning(stopped, tmp_path, caplog):
    source = os.path.join(stopped[0].args.local_results_path, "models", "token")
    folder = str(tmp_path / "token")
    shutil.copytree(source, folder)
    with open(os.path.join(folder, "31", "opt.th"), "r+b") as f:
        f.truncate(100)
    os.remove(os.path.join(folder, "21", "target", "mixer.th"))
    with caplog.at_level(logging.WARNING):
        path, step, state = checkpoint.select(folder, 0, need_state=True, log=LOG)
    assert (path, step, state["runner"]["t_env"]) == (os.path.join(folder, "11"), 11, 11)
    assert f"checkpoint {folder}/31 is damaged: opt.th does not match its checksum" in caplog.text
    assert f"checkpoint {folder}/21 is incomplete: target/mixer.th is missing" in caplog.text
    with pytest.raises(checkpoint.CheckpointError, match=f"^checkpoint {folder}/31 is damaged: opt.th does not match"):
        checkpoint.select(folder, 31, need_state=True, log=LOG)
    os.remove(os.path.join(folder, "11", checkpoint.TRAINING_STATE))
    os.remove(os.path.join(folder, "1", "agent.th"))
    with pytest.raises(checkpoint.CheckpointError, match=f"^no complete checkpoint in {folder}: "):
        checkpoint.select(folder, 0, need_state=True, log=LOG)


def test_interrupted_save_leaves_the_previous_checkpoint(tmp_path):
    target = str(tmp_path / "models" / "token" / "50")

    def fail_halfway(folder):
        with open(os.path.join(folder, "agent.th"), "w") as f:
            f.write("partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        checkpoint.write_atomically(target, fail_halfway)
    assert not os.path.exists(target)  # only a hidden temporary folder, which loading ignores
    with pytest.raises(checkpoint.CheckpointNotFound, match="has no saved models"):
        checkpoint.saved_steps(str(tmp_path / "models" / "token"))


def test_nan_loss_stops_training_and_keeps_the_last_checkpoint(stopped):
    b, point = resumed_loop(stopped[0])
    try:
        folder = os.path.dirname(point.folder)
        before = {name: os.path.getmtime(os.path.join(folder, name)) for name in os.listdir(folder)}
        weights = copy.deepcopy(b.learner.mac.agent.state_dict())
        for reward in b.buffer.transition_data["reward"][:b.buffer.episodes_in_buffer]:  # [length, 1] each
            reward.fill_(float("nan"))
        with pytest.raises(FloatingPointError, match=r"the loss became nan at t_env 3\d: training stopped"):
            b.run()
        assert tensors_equal(b.learner.mac.agent.state_dict(), weights)  # no step was taken with the NaN loss
        assert {name: os.path.getmtime(os.path.join(folder, name)) for name in os.listdir(folder)} == before
    finally:
        b.runner.close_env()


def test_resumed_run_continues_the_logged_curves(tmp_path):
    """End to end: stop at t_max; resume from the checkpoint before the last one (load_step) with a larger
    t_max: a new branch with its own unique_token, whose info.json and TensorBoard curves start with the
    first run's up to the checkpoint (what the first run logged later stays in its own folders); then a
    plain resume of the branch continues it in its folders."""
    common = ["--config=qmix", "--env-config=one_step_matrix_game", "with", "seed=3", f"local_results_path={tmp_path}",
              "batch_size_run=2", "test_interval=20", "test_nepisode=2", "log_interval=20", "runner_log_interval=20",
              "learner_log_interval=20", "use_tensorboard=True", "save_model=True", "save_model_interval=20",
              *[f"{key}={value}" for key, value in SMALL.items()]]
    first = run_main(*common, "t_max=40")
    assert first.returncode == 0, first.stderr[-3000:]
    (token,) = os.listdir(tmp_path / "models")
    second = run_main(*common, "t_max=80", f"checkpoint_path={tmp_path / 'models' / token}", "resume=True",
                      "load_step=22")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "Resuming from " + str(tmp_path / "models" / token / "22") in second.stderr
    assert "the checkpoint has no replay buffer (save_buffer was off)" in second.stderr
    (branch,) = set(os.listdir(tmp_path / "models")) - {token}
    assert f"the resumed run is a new branch, saved under models/{branch}" in second.stderr
    assert sorted(int(step) for step in os.listdir(tmp_path / "models" / token)) == [2, 22, 42]  # untouched
    assert sorted(int(step) for step in os.listdir(tmp_path / "models" / branch)) == [42, 62, 82]
    config = read_json(run_dir(str(tmp_path), "one_step_matrix_game", "qmix_env=8_adam_td_lambda", 2), "config.json")
    assert config["unique_token"] == branch
    info = read_json(run_dir(str(tmp_path), "one_step_matrix_game", "qmix_env=8_adam_td_lambda", 2), "info.json")
    assert info["test_return_mean_T"] == [2, 22, 42, 62, 82]
    for key in ("return_mean", "loss_td", "epsilon", "episode"):
        steps = info[f"{key}_T"]
        assert steps == sorted(set(steps)) and steps[-1] > 42, key  # no restart at 0, no repeated step
    first_info = read_json(run_dir(str(tmp_path), "one_step_matrix_game", "qmix_env=8_adam_td_lambda", 1), "info.json")
    for key in ("loss_td", "return_mean"):  # the resumed run's curves start with the first's, up to t_env 22
        upto = sum(t <= 22 for t in first_info[f"{key}_T"])
        assert upto > 0 and info[key][:upto] == first_info[key][:upto]
        assert info[f"{key}_T"][upto] > 22 and first_info[f"{key}_T"][-1] > 22
    assert info["episode"][-1] == info["episode_T"][-1]  # one env step per episode: the count went on
    for folder, steps in ((token, [2, 22, 42]), (branch, [2, 22, 42, 62, 82])):
        events = EventAccumulator(str(tmp_path / "tb_logs" / folder))
        events.Reload()
        assert [s.step for s in events.Scalars("test_return_mean")] == steps
    assert [s.step for s in events.Scalars("epsilon")] == info["epsilon_T"]

    third = run_main(*common, "t_max=100", f"checkpoint_path={tmp_path / 'models' / branch}", "resume=True")
    assert third.returncode == 0, third.stderr[-3000:]
    assert sorted(os.listdir(tmp_path / "models")) == sorted([token, branch])  # the newest: no new branch
    assert sorted(int(step) for step in os.listdir(tmp_path / "models" / branch)) == [42, 62, 82, 102]


def flip_bytes(path: str, count: int = 64) -> None:
    """Invert `count` bytes in the middle of a file, as bit rot would (the file still unpickles)."""
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        data = f.read(count)
        f.seek(-len(data), os.SEEK_CUR)
        f.write(bytes(255 - b for b in data))


@pytest.mark.parametrize("name", ["agent.th", "buffer.pt", "target/mixer.th", "training_state.pt"])
def test_bit_rot_is_caught_by_the_checksums_and_the_previous_checkpoint_used(stopped, tmp_path, caplog, name):
    folder = str(tmp_path / "token")
    shutil.copytree(os.path.join(stopped[0].args.local_results_path, "models", "token"), folder)
    flip_bytes(os.path.join(folder, "31", name))
    with caplog.at_level(logging.WARNING):
        path, step, _ = checkpoint.select(folder, 0, need_state=True, log=LOG)
    assert step == 21
    assert f"checkpoint {folder}/31 is damaged: {name} does not match its checksum" in caplog.text


def test_models_only_checkpoints_are_read_whole(tmp_path):
    """PyMARL2's checkpoints (no training state, no checksums): every .th file must load."""
    folder = tmp_path / "100"
    folder.mkdir()
    for name in ("agent.th", "opt.th"):
        th.save({"w": th.zeros(2)}, folder / name)
    (folder / "mixer.th").write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(checkpoint.CheckpointError, match=f"checkpoint {folder} is damaged: mixer.th cannot be read"):
        checkpoint.verify(str(folder), need_state=False)


def test_a_failed_write_leaves_nothing_and_stale_temporaries_are_removed(tmp_path):
    parent = tmp_path / "models" / "token"
    stale = parent / ".40.tmp-999999999"  # left by a process that died while saving
    stale.mkdir(parents=True)
    checkpoint.write_atomically(str(parent / "10"), lambda folder: th.save({"w": 1}, os.path.join(folder, "a.th")))
    assert sorted(os.listdir(parent)) == ["10"]
    assert json.load(open(parent / "10" / checkpoint.CHECKSUMS)).keys() == {"a.th"}

    def disk_full(folder):
        with open(os.path.join(folder, "a.th"), "wb") as f:
            f.write(b"partial")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(checkpoint.CheckpointWriteError, match=r"could not write checkpoint .*/20 \(No space left on "
                                                              r"device: .* MB free\); nothing of it was kept"):
        checkpoint.write_atomically(str(parent / "20"), disk_full)
    assert sorted(os.listdir(parent)) == ["10"]


@pytest.mark.parametrize("signals", [1, 3])
def test_signals_during_the_final_save_let_it_finish(tmp_path, signals):
    """Stop signals while the end-of-training checkpoint is written, however many: it is completed, then the
    run stops as interrupted."""
    import signal as signals_module
    from run.run import TrainingInterrupted
    loop = make_loop(make_args(str(tmp_path), t_max=25, save_model_interval=10))
    write = loop._write_checkpoint

    def write_with_signals(folder):
        if loop.runner.t_env > loop.args.t_max:  # the final save
            for _ in range(signals):
                os.kill(os.getpid(), signals_module.SIGTERM)
        write(folder)

    loop._write_checkpoint = write_with_signals
    try:
        with pytest.raises(TrainingInterrupted):
            loop.run()
    finally:
        loop.runner.close_env()
    folder = os.path.join(str(tmp_path), "models", "token")
    steps = sorted(int(step) for step in os.listdir(folder) if step.isdigit())
    assert [name for name in os.listdir(folder) if not name.isdigit()] == []  # no temporary folder left
    assert steps == [1, 11, 21, 26]
    checkpoint.select(folder, 0, need_state=True, log=LOG)  # the newest is whole


def test_a_stop_that_gives_up_on_a_hung_worker_still_saves_the_last_whole_iteration(tmp_path):
    """The runner raises StoppedWaiting after a stop signal when a worker hangs: the unfinished batch is
    dropped, and the final checkpoint holds the state after the last complete iteration."""
    import signal as signals_module
    from run.run import TrainingInterrupted
    from utils.stop import StoppedWaiting
    loop = make_loop(make_args(str(tmp_path), t_max=1000, save_model_interval=1000))
    collect = loop.collect

    def collect_then_hang():
        if loop.runner.t_env >= 5:
            os.kill(os.getpid(), signals_module.SIGINT)
            raise StoppedWaiting("env worker 0 did not answer within 5 s of SIGINT")
        collect()

    loop.collect = collect_then_hang
    try:
        with pytest.raises(TrainingInterrupted):
            loop.run()
    finally:
        loop.runner.close_env()
    folder = os.path.join(str(tmp_path), "models", "token")
    state = checkpoint.verify(os.path.join(folder, "5"), need_state=True)
    assert (state["runner"]["t_env"], state["episode"]) == (5, 5)


def test_a_checkpoint_of_other_simulator_code_is_refused_unless_allowed(caplog):
    folder, this = "models/token/31", "aaaaaaaaaaaa"
    check_same_simulator(folder, this, this, False, LOG)  # the same code: nothing to say
    with pytest.raises(checkpoint.CheckpointError, match="checkpoint models/token/31 was trained on the built-in "
                       "simulator with sources sha256 bbbbbbbbbbbb, this code's is aaaaaaaaaaaa"):
        check_same_simulator(folder, "bbbbbbbbbbbb", this, False, LOG)
    with caplog.at_level(logging.WARNING):
        check_same_simulator(folder, "bbbbbbbbbbbb", this, True, LOG)
        check_same_simulator(folder, None, this, False, LOG)
    assert "allow_simulator_change=True: going on with simulator sources aaaaaaaaaaaa" in caplog.text
    assert "the checkpoint records no built-in simulator version" in caplog.text


def test_resume_on_the_builtin_simulator_checks_the_simulator_it_was_trained_on(tmp_path):
    short = ["--config=qmix", "--env-config=sc2", "with", "env_args.map_name=3m", "env_args.backend=builtin",
             "t_max=60", "batch_size_run=2", "buffer_size=8", "batch_size=4", "test_interval=100", "test_nepisode=2",
             "use_cuda=False", "save_model=True", "save_model_interval=100", f"local_results_path={tmp_path}"]
    first = run_main(*short)
    assert first.returncode == 0, first.stderr[-3000:]
    (token,) = os.listdir(tmp_path / "models")
    saved = str(tmp_path / "models" / token)
    folder = os.path.join(saved, str(max(checkpoint.saved_steps(saved))))  # the one resume picks
    state = checkpoint.load_file(folder, checkpoint.TRAINING_STATE)
    assert state["simulator"] == builtin_sources_digest()
    state["simulator"] = "0123456789ab"  # as if trained on other simulator code
    th.save(state, os.path.join(folder, checkpoint.TRAINING_STATE))
    os.remove(os.path.join(folder, checkpoint.CHECKSUMS))
    checkpoint.write_checksums(folder)
    resume = ["t_max=120", "resume=True", f"checkpoint_path={saved}"]
    refused = run_main(*short, *resume)  # (allow_simulator_change=True: the test above)
    assert refused.returncode != 0
    assert (f"checkpoint {folder} was trained on the built-in simulator with sources sha256 0123456789ab, "
            f"this code's is {builtin_sources_digest()}") in refused.stderr
