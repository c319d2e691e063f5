"""Checkpoints: <local_results_path>/models/<unique_token>/<t_env>/.

A checkpoint folder holds the learner's files (agent.th, mixer.th, opt.th, target/agent.th,
target/mixer.th), training_state.pt (counters, RNG states, the logged curves and the list of
files that make the checkpoint complete) and, with save_buffer, buffer.pt. It is written into a
hidden temporary folder next to its final place and renamed into place when complete, so a
folder named by a t_env is never half written.
"""
import os
import pickle
import random
import shutil
import zipfile

import numpy as np
import torch as th

TRAINING_STATE = "training_state.pt"
BUFFER_FILE = "buffer.pt"
STATE_VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded; the message names its folder."""


class CheckpointNotFound(CheckpointError, FileNotFoundError):
    """No checkpoint folder where one was expected."""


def saved_steps(checkpoint_path: str) -> list:
    """The t_env of every checkpoint folder under checkpoint_path, ascending."""
    if not os.path.isdir(checkpoint_path):
        raise CheckpointNotFound(f"checkpoint_path '{checkpoint_path}' is not a directory; "
                                 f"pass a folder like <local_results_path>/models/<unique_token>")
    steps = sorted(int(name) for name in os.listdir(checkpoint_path)
                   if name.isdigit() and os.path.isdir(os.path.join(checkpoint_path, name)))
    if not steps:
        raise CheckpointNotFound(f"checkpoint_path '{checkpoint_path}' has no saved models "
                                 f"(sub-folders named by t_env, written when save_model=True)")
    return steps


def checkpoint_step(checkpoint_path: str, load_step: int) -> int:
    """The saved t_env to load: the largest when load_step is 0, else the one closest to load_step."""
    steps = saved_steps(checkpoint_path)
    if load_step == 0:
        return steps[-1]
    return min(steps, key=lambda step: abs(step - load_step))


def saved_precision(checkpoint_path: str, load_step: int) -> str | None:
    """The train_precision recorded in the checkpoint that load_step picks; None when it records none
    (saved before marlkit recorded it) or cannot be read (resuming reports that in its own words)."""
    try:
        folder = os.path.join(checkpoint_path, str(checkpoint_step(checkpoint_path, load_step)))
        return load_file(folder, TRAINING_STATE).get("train_precision")
    except CheckpointError:
        return None


def load_file(folder: str, name: str, mmap: bool = False):
    """th.load of folder/name on the CPU; CheckpointError naming the folder when it is missing or damaged."""
    path = os.path.join(folder, name)
    if not os.path.isfile(path):
        raise CheckpointError(f"checkpoint {folder} is incomplete: {name} is missing")
    try:
        return th.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except (RuntimeError, OSError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile) as error:
        reason = " ".join(str(error).split())[:200]
        raise CheckpointError(f"checkpoint {folder} is damaged: {name} cannot be read ({reason})") from None


def verify(folder: str, need_state: bool):
    """Load every file of the checkpoint once (the buffer only mapped) to prove it is complete and
    readable; returns its training state (None for a models-only checkpoint when not need_state)."""
    has_state = os.path.isfile(os.path.join(folder, TRAINING_STATE))
    if not has_state and need_state:
        raise CheckpointError(f"checkpoint {folder} has no {TRAINING_STATE} (saved before resume existed, or "
                              f"unfinished), so it cannot be resumed; load it without resume=True to start "
                              f"a new run from its weights")
    state = load_file(folder, TRAINING_STATE) if has_state else None
    if state is not None and state.get("version") != STATE_VERSION:
        raise CheckpointError(f"checkpoint {folder} has a {TRAINING_STATE} of version {state.get('version')}, "
                              f"this marlkit reads version {STATE_VERSION}")
    for name in state["files"] if state else ["agent.th", "opt.th"]:
        load_file(folder, name, mmap=name == BUFFER_FILE)
    return state


def select(checkpoint_path: str, load_step: int, need_state: bool, log) -> tuple:
    """(folder, t_env, training state) of the checkpoint to load: the one closest to load_step, or
    with load_step 0 the newest complete one (a damaged newer one is skipped with a warning)."""
    if load_step != 0:
        step = checkpoint_step(checkpoint_path, load_step)
        folder = os.path.join(checkpoint_path, str(step))
        return folder, step, verify(folder, need_state)
    errors = []
    for step in reversed(saved_steps(checkpoint_path)):
        folder = os.path.join(checkpoint_path, str(step))
        try:
            state = verify(folder, need_state)
        except CheckpointError as error:
            log.warning(f"{error}; trying the previous checkpoint")
            errors.append(str(error))
            continue
        return folder, step, state
    raise CheckpointError(f"no complete checkpoint in {checkpoint_path}: {errors[0]}")


def write_atomically(folder: str, write) -> None:
    """Call write(temporary folder), then move the finished folder to `folder` (replacing it)."""
    parent, name = os.path.split(folder)
    os.makedirs(parent, exist_ok=True)
    temporary = os.path.join(parent, f".{name}.tmp-{os.getpid()}")
    shutil.rmtree(temporary, ignore_errors=True)
    os.makedirs(temporary)
    write(temporary)
    if os.path.exists(folder):
        old = os.path.join(parent, f".{name}.old-{os.getpid()}")
        os.rename(folder, old)
        os.rename(temporary, folder)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(temporary, folder)


def rng_states() -> dict:
    """The python, numpy and torch random generator states, as plain lists and tensors."""
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    states = {"python": random.getstate(), "numpy": [name, keys.tolist(), pos, has_gauss, gauss],
              "torch": th.get_rng_state()}
    if th.cuda.is_available():
        states["cuda"] = th.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict) -> None:
    version, internal, gauss_next = states["python"]
    random.setstate((version, tuple(internal), gauss_next))
    name, keys, pos, has_gauss, gauss = states["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, gauss))
    th.set_rng_state(states["torch"])
    if "cuda" in states and th.cuda.is_available():
        th.cuda.set_rng_state_all(states["cuda"])


def load_buffer_state(buffer, state: dict, folder: str) -> None:
    """Restore a ReplayBuffer saved with its state_dict(); one CheckpointError line naming the folder when
    the saved buffer does not fit this run's buffer."""
    try:
        buffer.load_state_dict(state)
    except ValueError as error:
        raise CheckpointError(f"checkpoint {folder}: {error}; resume with the same settings or with "
                              f"save_buffer=False") from None
