"""Checkpoints: <local_results_path>/models/<unique_token>/<t_env>/.

A checkpoint folder holds the learner's files (agent.th, mixer.th, opt.th, target/agent.th,
target/mixer.th), training_state.pt (counters, RNG states, the logged curves and the list of
files that make the checkpoint complete), with save_buffer buffer.pt, and checksums.json (the
SHA-256 of every other file, verified on load: a flipped byte that still unpickles is caught).
It is written into a hidden temporary folder next to its final place, synced to disk, and
renamed into place when complete, so a folder named by a t_env is never half written; a write
that fails (a full disk, a KeyboardInterrupt) removes its temporary folder, and temporary
folders left by a process that died (a power loss) are removed by the next one.
"""
import errno
import hashlib
import json
import os
import pickle
import random
import re
import shutil
import zipfile

import numpy as np
import torch as th

TRAINING_STATE = "training_state.pt"
BUFFER_FILE = "buffer.pt"
OFF_BUFFER_FILE = "off_" + BUFFER_FILE  # the off-policy buffer of DOP and RIIT
CHECKSUMS = "checksums.json"
STATE_VERSION = 1
FULL_DISK_BYTES = 1 << 20  # a failed write with less free space than this is taken for a full disk
TEMPORARY = re.compile(r"^\.(?P<name>.+)\.(tmp|old)-(?P<pid>\d+)$")  # write_atomically's work folders


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded; the message names its folder."""


class CheckpointNotFound(CheckpointError, FileNotFoundError):
    """No checkpoint folder where one was expected."""


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (e.g. the disk is full); nothing of it was left behind."""


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


def saved_state(checkpoint_path: str, load_step: int) -> dict | None:
    """The training state of the checkpoint that load_step picks (0: the newest); None when there is none
    to read (resuming reports that in its own words)."""
    try:
        folder = os.path.join(checkpoint_path, str(checkpoint_step(checkpoint_path, load_step)))
        return load_file(folder, TRAINING_STATE)
    except CheckpointError:
        return None


def saved_precision(checkpoint_path: str, load_step: int) -> str | None:
    """The train_precision recorded in the checkpoint that load_step picks; None when it records none
    (saved before marlkit recorded it) or cannot be read."""
    return (saved_state(checkpoint_path, load_step) or {}).get("train_precision")


def is_older_step(checkpoint_path: str, load_step: int) -> bool:
    """Whether load_step picks a checkpoint older than the newest one under checkpoint_path (resuming
    from it starts another timeline); False when there is none to pick (resuming reports that)."""
    try:
        return load_step != 0 and checkpoint_step(checkpoint_path, load_step) < saved_steps(checkpoint_path)[-1]
    except CheckpointError:
        return False


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
    """Check every file of the checkpoint against checksums.json, then load each once (the buffer only
    mapped) to prove it is complete and readable; returns its training state (None for a models-only
    checkpoint, e.g. PyMARL2's, when not need_state; all its .th files are loaded then)."""
    has_state = os.path.isfile(os.path.join(folder, TRAINING_STATE))
    if not has_state and need_state:
        raise CheckpointError(f"checkpoint {folder} has no {TRAINING_STATE} (saved before resume existed, or "
                              f"unfinished), so it cannot be resumed; load it without resume=True to start "
                              f"a new run from its weights")
    verify_checksums(folder)
    state = load_file(folder, TRAINING_STATE) if has_state else None
    if state is not None and state.get("version") != STATE_VERSION:
        raise CheckpointError(f"checkpoint {folder} has a {TRAINING_STATE} of version {state.get('version')}, "
                              f"this marlkit reads version {STATE_VERSION}")
    if state:
        names = state["files"]
    else:  # agent.th and opt.th first (named when missing), then every other model file, each once
        models = sorted(name for name in os.listdir(folder) if name.endswith(".th"))
        names = dict.fromkeys(["agent.th", "opt.th", *models])
    for name in names:
        load_file(folder, name, mmap=name.endswith(BUFFER_FILE))
    return state


def file_digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def write_checksums(folder: str) -> None:
    """checksums.json: the SHA-256 of every file under `folder` (paths relative to it)."""
    digests = {os.path.relpath(path, folder): file_digest(path) for path in _files(folder)}
    with open(os.path.join(folder, CHECKSUMS), "w") as f:
        json.dump(digests, f, indent=1, sort_keys=True)


def verify_checksums(folder: str) -> None:
    """CheckpointError naming the first file whose content does not match checksums.json (no-op for
    checkpoints saved without checksums, e.g. PyMARL2's)."""
    path = os.path.join(folder, CHECKSUMS)
    if not os.path.isfile(path):
        return
    try:
        with open(path) as f:
            digests = json.load(f)
    except (OSError, ValueError) as error:
        raise CheckpointError(f"checkpoint {folder} is damaged: {CHECKSUMS} cannot be read ({error})") from None
    for name, digest in sorted(digests.items()):
        file = os.path.join(folder, name)
        if not os.path.isfile(file):
            raise CheckpointError(f"checkpoint {folder} is incomplete: {name} is missing")
        if file_digest(file) != digest:
            raise CheckpointError(f"checkpoint {folder} is damaged: {name} does not match its checksum (its bytes "
                                  f"changed after it was written)")


def _files(folder: str) -> list:
    return sorted(os.path.join(root, name) for root, _, names in os.walk(folder) for name in names)


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
    """Call write(temporary folder), add checksums.json, sync everything to disk, then move the
    finished folder to `folder` (replacing it). Any failure, a full disk or a KeyboardInterrupt
    included, removes the temporary folder; a failed write raises CheckpointWriteError."""
    parent, name = os.path.split(folder)
    os.makedirs(parent, exist_ok=True)
    remove_stale_temporaries(parent)
    temporary = os.path.join(parent, f".{name}.tmp-{os.getpid()}")
    try:
        os.makedirs(temporary)
        write(temporary)
        write_checksums(temporary)
        for path in _files(temporary):
            _fsync(path)
        for root, _, _ in os.walk(temporary):
            _fsync(root)
    except BaseException as error:
        shutil.rmtree(temporary, ignore_errors=True)
        if isinstance(error, (OSError, RuntimeError)):  # torch.save reports a full disk as a RuntimeError
            raise CheckpointWriteError(f"could not write checkpoint {folder} ({_write_failure(error, parent)}); "
                                       f"nothing of it was kept, the earlier checkpoints stay") from None
        raise
    _move_into_place(temporary, folder)
    _fsync(parent)


def _write_failure(error: BaseException, folder: str) -> str:
    """Why a write into `folder` failed, in a few words (a full disk said as such)."""
    free = shutil.disk_usage(folder).free
    if getattr(error, "errno", None) == errno.ENOSPC or free < FULL_DISK_BYTES:
        return f"No space left on device: {free / 1e6:.1f} MB free"
    return getattr(error, "strerror", None) or " ".join(str(error).split())[:200]


def _move_into_place(temporary: str, folder: str) -> None:
    parent, name = os.path.split(folder)
    if not os.path.exists(folder):
        os.rename(temporary, folder)
        return
    old = os.path.join(parent, f".{name}.old-{os.getpid()}")
    os.rename(folder, old)
    os.rename(temporary, folder)
    shutil.rmtree(old, ignore_errors=True)


def _fsync(path: str) -> None:
    """Flush a file's or a folder's content (a folder: its entries) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as error:
        if error.errno != errno.EINVAL:  # file systems that cannot sync a folder
            raise
    finally:
        os.close(fd)


def remove_stale_temporaries(parent: str) -> list:
    """Remove the hidden work folders of write_atomically under `parent` that another process left
    (it died while saving: a power loss, SIGKILL); returns their names. Two live processes never
    write into one models/<unique_token> folder, so every one not of this process is stale."""
    stale = [entry for entry in os.listdir(parent)
             if (match := TEMPORARY.match(entry)) and int(match["pid"]) != os.getpid()]
    for entry in stale:
        shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)
    return stale


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
