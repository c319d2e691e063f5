"""Storage for batches of episodes (EpisodeBatch, dense) and the replay buffer (ReplayBuffer,
each episode kept at its own length).

A *scheme* describes the fields, e.g.::

    {"obs": {"vshape": obs_dim, "group": "agents"},
     "actions": {"vshape": (1,), "group": "agents", "dtype": th.uint8},
     "state": {"vshape": state_dim}}

with groups = {"agents": n_agents}. A field with "group" gets one row per group member.

EpisodeBatch (what a runner writes, and what ReplayBuffer.sample returns) is dense: per-step
fields ("transition data") are [batch, time, *shape] with time = max_seq_length; fields marked
"episode_const" ("episode data") have no time dim: [batch, *shape]. The reserved bool field
"filled" [batch, time, 1] is True where a step holds real data, so learners can mask the
padding of episodes that ended before max_seq_length.

ReplayBuffer keeps a ring of buffer_size episode slots. Slot i holds, for each per-step field,
one tensor [length_i, *shape] (length_i = the episode's last filled step + 1: its env steps and
the final state row) and, for each episode-constant field, row i of a [buffer_size, *shape]
tensor. Memory is therefore (sum of stored lengths) x (bytes per step), not buffer_size x
max_seq_length x (bytes per step). sample(n) pads the drawn episodes with zeros to the longest
of them: [n, max length_i, *shape], "filled" False in the padding.
"""
import random
from numbers import Integral
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np
import torch as th
from torch.nn.utils.rnn import pad_sequence

Index = int | slice | list | np.ndarray | th.Tensor


def _empty_data() -> SimpleNamespace:
    return SimpleNamespace(transition_data={}, episode_data={})


def _check_safe_view(value: th.Tensor, dest: th.Tensor) -> None:
    """Writing `value` into `dest` may only add or drop size-1 dims, never regroup data."""
    if [s for s in value.shape if s != 1] != [s for s in dest.shape if s != 1]:
        raise ValueError(f"cannot write data of shape {tuple(value.shape)} into a slot of shape "
                         f"{tuple(dest.shape)}; check the vshape in the scheme and the bs/ts given")


def _num_items(index: Index, size: int) -> int:
    if isinstance(index, slice):
        return len(range(*index.indices(size)))
    return len(index)


class EpisodeBatch:
    def __init__(self, scheme: dict, groups: dict, batch_size: int, max_seq_length: int,
                 data: SimpleNamespace | None = None, preprocess: dict | None = None,
                 device: str = "cpu"):
        """Allocates zeroed storage for `scheme`, or wraps existing `data` (used for views)."""
        self.scheme = dict(scheme)  # preprocess outputs and "filled" are added to this copy
        self.groups = groups
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self.preprocess = {} if preprocess is None else preprocess
        self.device = device

        if data is not None:
            self.data = data
        else:
            self.data = _empty_data()
            self._setup_data()

    # --- allocation -------------------------------------------------------------------------

    def _setup_data(self) -> None:
        if "filled" in self.scheme:
            raise ValueError('"filled" is a reserved scheme key (the padding mask); rename your field')
        self._add_preprocessed_fields()
        self.scheme["filled"] = {"vshape": (1,), "dtype": th.bool}

        for key, info in self.scheme.items():
            shape = self._field_shape(key, info)
            dtype = info.get("dtype", th.float32)
            if info.get("episode_const", False):
                self.data.episode_data[key] = th.zeros(
                    (self.batch_size, *shape), dtype=dtype, device=self.device)  # [batch, *shape]
            else:
                self.data.transition_data[key] = th.zeros(
                    (self.batch_size, self.max_seq_length, *shape), dtype=dtype,
                    device=self.device)  # [batch, time, *shape]

    def _add_preprocessed_fields(self) -> None:
        """Adds a scheme entry for each preprocess output, shaped by its transforms."""
        for key, (new_key, transforms) in self.preprocess.items():
            if key not in self.scheme:
                raise ValueError(f"preprocess key '{key}' is not in the scheme; "
                                 f"scheme keys: {', '.join(self.scheme)}")
            vshape, dtype = self.scheme[key]["vshape"], self.scheme[key].get("dtype", th.float32)
            for transform in transforms:
                vshape, dtype = transform.infer_output_info(vshape, dtype)
            new_info = {"vshape": vshape, "dtype": dtype}
            for inherited in ("group", "episode_const"):
                if inherited in self.scheme[key]:
                    new_info[inherited] = self.scheme[key][inherited]
            self.scheme[new_key] = new_info

    def _field_shape(self, key: str, info: dict) -> tuple:
        if "vshape" not in info:
            raise ValueError(f"scheme entry '{key}' has no 'vshape'; give its per-item shape")
        vshape = info["vshape"]
        vshape = (vshape,) if isinstance(vshape, int) else tuple(vshape)
        group = info.get("group")
        if group is None:
            return vshape
        if group not in self.groups:
            raise ValueError(f"scheme entry '{key}' uses group '{group}' which is not in groups "
                             f"{sorted(self.groups)}; add its member count to groups")
        return (self.groups[group], *vshape)

    def to(self, device: str) -> "EpisodeBatch":
        """Moves all storage to `device` in place (returns self for chaining)."""
        for store in (self.data.transition_data, self.data.episode_data):
            for key, value in store.items():
                store[key] = value.to(device)
        self.device = device
        return self

    # --- writing ----------------------------------------------------------------------------

    def update(self, data: dict, bs: Index = slice(None), ts: Index = slice(None),
               mark_filled: bool = True) -> None:
        """Writes each data[key] into rows `bs` and steps `ts` (steps are ignored for episode data).

        With mark_filled, "filled" is set to True for the written (bs, ts) the first time a
        transition field is written. Fields with a preprocess entry also refresh their output.
        """
        slices = self._parse_slices((bs, ts))
        for key, value in data.items():
            if key in self.data.transition_data:
                store, index = self.data.transition_data, slices
                if mark_filled:
                    store["filled"][index] = 1
                    mark_filled = False
            elif key in self.data.episode_data:
                store, index = self.data.episode_data, slices[0]
            else:
                raise KeyError(f"'{key}' is not a field of this batch; "
                               f"fields: {', '.join(self.scheme)}")

            value = self._to_tensor(value, self.scheme[key].get("dtype", th.float32))
            dest_shape = store[key][index].shape
            _check_safe_view(value, store[key][index])
            store[key][index] = value.reshape(dest_shape)

            if key in self.preprocess:
                self._apply_preprocess(key, store, index)

    def _to_tensor(self, value, dtype: th.dtype) -> th.Tensor:
        if isinstance(value, th.Tensor):
            return value.to(device=self.device, dtype=dtype)
        # np.asarray first: torch is slow on lists of numpy arrays (e.g. per-agent obs).
        return th.as_tensor(np.asarray(value), dtype=dtype, device=self.device)

    def _apply_preprocess(self, key: str, store: dict, index) -> None:
        new_key, transforms = self.preprocess[key]
        value = store[key][index]
        for transform in transforms:
            value = transform.transform(value)
        store[new_key][index] = value.reshape(store[new_key][index].shape)

    # --- reading ----------------------------------------------------------------------------

    def __getitem__(self, item):
        """batch["obs"] → the stored tensor; batch["obs", "state"] → a batch of those fields;
        batch[bs] or batch[bs, ts] → a batch of those episodes/steps (a view when both are
        slices or ints, a copy when bs is a list/array of episode ids)."""
        if isinstance(item, str):
            return self._field(item)
        if isinstance(item, tuple) and all(isinstance(key, str) for key in item):
            return self._select_fields(item)
        return self._select_slices(item)

    def _field(self, key: str) -> th.Tensor:
        if key in self.data.episode_data:
            return self.data.episode_data[key]
        if key in self.data.transition_data:
            return self.data.transition_data[key]
        raise KeyError(f"'{key}' is not a field of this batch; fields: {', '.join(self.scheme)}")

    def _select_fields(self, keys: tuple) -> "EpisodeBatch":
        new_data = _empty_data()
        for key in keys:
            if key in self.data.transition_data:
                new_data.transition_data[key] = self.data.transition_data[key]
            elif key in self.data.episode_data:
                new_data.episode_data[key] = self.data.episode_data[key]
            else:
                raise KeyError(f"'{key}' is not a field of this batch; "
                               f"fields: {', '.join(self.scheme)}")
        new_scheme = {key: self.scheme[key] for key in keys}
        new_groups = {self.scheme[key]["group"]: self.groups[self.scheme[key]["group"]]
                      for key in keys if "group" in self.scheme[key]}
        return EpisodeBatch(new_scheme, new_groups, self.batch_size, self.max_seq_length,
                            data=new_data, device=self.device)

    def _select_slices(self, item) -> "EpisodeBatch":
        bs, ts = self._parse_slices(item)
        new_data = _empty_data()
        for key, value in self.data.transition_data.items():
            new_data.transition_data[key] = value[bs, ts]
        for key, value in self.data.episode_data.items():
            new_data.episode_data[key] = value[bs]
        return EpisodeBatch(self.scheme, self.groups, _num_items(bs, self.batch_size),
                            _num_items(ts, self.max_seq_length), data=new_data,
                            preprocess=self.preprocess, device=self.device)

    @staticmethod
    def _parse_slices(item) -> tuple:
        """Normalises an index to (batch_index, time_slice); an int i becomes slice(i, i+1) so
        that indexing never drops the batch or time dim."""
        if not isinstance(item, tuple):
            item = (item, slice(None))  # batch index only: all time steps
        if len(item) != 2:
            raise IndexError(f"index an EpisodeBatch with [batch] or [batch, time], got {len(item)} indices")
        if isinstance(item[1], (list, np.ndarray, th.Tensor)):
            raise IndexError("time indexing must be contiguous: use an int or a slice, not a list")
        parsed = []
        for index in item:
            if isinstance(index, Integral):
                parsed.append(slice(int(index), int(index) + 1))
            elif isinstance(index, np.ndarray):
                parsed.append(th.as_tensor(index, dtype=th.long))
            else:
                parsed.append(index)
        return tuple(parsed)

    def max_t_filled(self) -> int:
        """Length of the longest episode in the batch (number of filled steps)."""
        return int(self.data.transition_data["filled"].sum(dim=1).max())

    def __repr__(self) -> str:
        return (f"EpisodeBatch. Batch Size:{self.batch_size} Max_seq_len:{self.max_seq_length} "
                f"Keys:{list(self.scheme)} Groups:{list(self.groups)}")


# Memory each stored tensor costs beyond its data: the tensor and storage objects and the allocation's
# bookkeeping. Measured 510-530 bytes per tensor (Python 3.11, torch 2.13, glibc) by inserting 40,000
# one-step episodes, whose data is a few dozen bytes: without it the memory check would
# underestimate a buffer of short episodes 50-fold.
TENSOR_OVERHEAD_BYTES = 512


class StorageBytes(NamedTuple):
    """Bytes a ReplayBuffer stores per step of an episode (every per-step field, "filled" and
    preprocess outputs included) and per episode (its episode-constant fields, and the overhead of
    the tensors that hold each stored episode's steps)."""
    step: int
    episode: int

    def for_episodes(self, n_episodes: int, stored_steps: int) -> int:
        """Bytes of n_episodes episodes that keep `stored_steps` steps each (L env steps keep L + 1)."""
        return n_episodes * (stored_steps * self.step + self.episode)


def _nbytes(tensors) -> int:
    return sum(value.element_size() * value.numel() for value in tensors)


def _field_layout(batch: EpisodeBatch) -> dict:
    """key -> (per-item shape, dtype) of every field of `batch`, without its batch and time dims."""
    layout = {key: (tuple(value.shape[2:]), value.dtype) for key, value in batch.data.transition_data.items()}
    layout.update({key: (tuple(value.shape[1:]), value.dtype) for key, value in batch.data.episode_data.items()})
    return layout


def stored_lengths(filled: th.Tensor) -> th.Tensor:
    """Steps each episode keeps: up to and including its last filled step (0 when none is).

    filled: [batch, time, 1] → [batch] (long).
    """
    steps = th.arange(1, filled.shape[1] + 1, device=filled.device)  # [time]
    return (filled[..., 0].bool() * steps).amax(dim=1)  # [batch]


class ReplayBuffer:
    """A ring of `buffer_size` episode slots, each episode kept at its own length (see the module
    docstring); new episodes overwrite the oldest once the ring is full.

    transition_data[key][slot] is a [length, *shape] tensor (None while the slot is empty),
    episode_data[key] a [buffer_size, *shape] tensor and lengths[slot] the slot's length.
    Slots fill from 0 upwards, so slots 0 .. episodes_in_buffer - 1 always hold episodes.
    """

    def __init__(self, scheme: dict, groups: dict, buffer_size: int, max_seq_length: int,
                 preprocess: dict | None = None, device: str = "cpu"):
        # A batch of no episodes resolves the scheme (groups, preprocess outputs, "filled") into
        # the shapes and dtypes the buffer stores.
        layout = EpisodeBatch(scheme, groups, 0, max_seq_length, preprocess=preprocess, device=device)
        self.layout = (scheme, groups, preprocess)  # as given: another buffer of this layout is built from them
        self.scheme = layout.scheme
        self.groups = groups
        self.preprocess = layout.preprocess
        self.device = device
        self.buffer_size = buffer_size
        self.max_seq_length = max_seq_length  # the longest episode (in stored steps) accepted
        self.fields = _field_layout(layout)
        self.transition_data = {key: [None] * buffer_size for key in layout.data.transition_data}
        self.episode_data = {key: value.new_zeros((buffer_size, *value.shape[1:]))  # [buffer_size, *shape]
                             for key, value in layout.data.episode_data.items()}
        self.lengths = np.zeros(buffer_size, dtype=np.int64)
        self.buffer_index = 0  # next slot to write
        self.episodes_in_buffer = 0

    @staticmethod
    def storage_bytes(scheme: dict, groups: dict, preprocess: dict | None = None) -> StorageBytes:
        """Bytes a buffer for this scheme stores per step and per episode, found without allocating it."""
        episode = EpisodeBatch(scheme, groups, 1, 1, preprocess=preprocess)
        per_episode_tensors = len(episode.data.transition_data) * TENSOR_OVERHEAD_BYTES
        return StorageBytes(step=_nbytes(episode.data.transition_data.values()),
                            episode=_nbytes(episode.data.episode_data.values()) + per_episode_tensors)

    def stored_bytes(self) -> int:
        """Bytes of tensor data the buffer holds now (stored episodes and episode-constant fields)."""
        episodes = (episode for slots in self.transition_data.values() for episode in slots if episode is not None)
        return _nbytes(episodes) + _nbytes(self.episode_data.values())

    # --- writing ----------------------------------------------------------------------------

    def insert_episode_batch(self, ep_batch: EpisodeBatch) -> None:
        """Stores each episode of `ep_batch` (dense, as a runner writes it) in the next slot, cut
        after its last filled step. Steps after it are dropped even if something was written there."""
        self._check_insertable(ep_batch)
        lengths = stored_lengths(ep_batch["filled"]).tolist()
        # One transfer per field to the buffer's device (none when it is already there), of the kept steps.
        kept = {key: ep_batch[key][:, :max(lengths, default=0)].to(self.device)
                for key in self.transition_data}  # [batch, longest length, *shape]
        for row, length in enumerate(lengths):
            # Copies of the episode's steps only: the runner's padded batch is not referenced.
            self._store({key: value[row, :length].clone() for key, value in kept.items()},  # [length, *shape]
                        {key: ep_batch[key][row] for key in self.episode_data}, length)

    def _check_insertable(self, ep_batch: EpisodeBatch) -> None:
        batch_fields = _field_layout(ep_batch)
        differ = sorted(key for key in batch_fields.keys() | self.fields.keys()
                        if batch_fields.get(key) != self.fields.get(key))
        if differ:
            raise ValueError(f"cannot insert the episode batch: its field(s) {', '.join(differ)} are missing or "
                             f"differ in shape or dtype from the buffer's; build both from the same scheme")
        if ep_batch.max_seq_length > self.max_seq_length:
            raise ValueError(f"cannot insert episodes of {ep_batch.max_seq_length} steps into a buffer "
                             f"built for at most {self.max_seq_length}")

    def _store(self, steps: dict, constants: dict, length: int) -> None:
        slot = self.buffer_index
        for key, value in steps.items():
            self.transition_data[key][slot] = value
        for key, value in constants.items():
            self.episode_data[key][slot] = value
        self.lengths[slot] = length
        self.buffer_index = (slot + 1) % self.buffer_size
        self.episodes_in_buffer = min(self.episodes_in_buffer + 1, self.buffer_size)

    # --- sampling ---------------------------------------------------------------------------

    def can_sample(self, batch_size: int) -> bool:
        return self.episodes_in_buffer >= batch_size

    def sample(self, batch_size: int) -> EpisodeBatch:
        """`batch_size` distinct episodes drawn uniformly from those stored (all of them, in slot
        order and without drawing random numbers, when batch_size == episodes_in_buffer)."""
        if not self.can_sample(batch_size):
            raise ValueError(f"cannot sample {batch_size} episodes: the buffer holds only "
                             f"{self.episodes_in_buffer}; check can_sample() first")
        if self.episodes_in_buffer == batch_size:
            return self._gather(np.arange(batch_size))
        return self._gather(np.random.choice(self.episodes_in_buffer, batch_size, replace=False))

    def sample_latest(self, batch_size: int) -> EpisodeBatch:
        """The `batch_size` newest episodes, oldest first, also where they wrap around the ring's end (there
        PyMARL2's sample_latest draws uniformly from the whole buffer instead)."""
        if not self.can_sample(batch_size):
            raise ValueError(f"cannot sample {batch_size} episodes: the buffer holds only "
                             f"{self.episodes_in_buffer}; check can_sample() first")
        return self._gather((self.buffer_index - batch_size + np.arange(batch_size)) % self.buffer_size)

    def _gather(self, slots: np.ndarray) -> EpisodeBatch:
        """The episodes in `slots` (filled ones) as a dense batch, zero-padded to the longest of them."""
        data = _empty_data()
        for key, stored in self.transition_data.items():
            data.transition_data[key] = pad_sequence(
                [stored[slot] for slot in slots], batch_first=True)  # [len(slots), max length, *shape]
        index = th.as_tensor(slots, dtype=th.long)
        for key, values in self.episode_data.items():
            data.episode_data[key] = values[index]  # [len(slots), *shape]
        return EpisodeBatch(self.scheme, self.groups, len(slots), int(self.lengths[slots].max()), data=data,
                            preprocess=self.preprocess, device=self.device)

    # --- checkpoints ------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """Ring position and stored episodes, each at its length: saved, it is about as large as
        the buffer in memory."""
        n = self.episodes_in_buffer
        return {"buffer_size": self.buffer_size, "buffer_index": self.buffer_index, "episodes_in_buffer": n,
                "transition_data": {key: slots[:n] for key, slots in self.transition_data.items()},
                "episode_data": dict(self.episode_data)}

    def load_state_dict(self, state: dict) -> None:
        """Restores state_dict() (its tensors may be mapped from a file: they are copied); a
        ValueError, before anything changes, when it does not fit this buffer."""
        self._check_state(state)
        n = state["episodes_in_buffer"]
        for key, slots in self.transition_data.items():
            slots[:] = [episode.to(self.device, copy=True) for episode in state["transition_data"][key]]
            slots.extend([None] * (self.buffer_size - n))
        for key, values in self.episode_data.items():
            values.copy_(state["episode_data"][key])
        self.lengths[:] = [0 if episode is None else len(episode) for episode in self.transition_data["filled"]]
        self.buffer_index, self.episodes_in_buffer = state["buffer_index"], n

    def _check_state(self, state: dict) -> None:
        if state["buffer_size"] != self.buffer_size:
            raise ValueError(f"the saved replay buffer has buffer_size={state['buffer_size']}, this run has "
                             f"buffer_size={self.buffer_size}")
        unfit = self._first_unfit_field(state)
        if unfit is not None:
            raise ValueError(f"the saved replay buffer's '{unfit}' does not fit this run's env/config (missing, or "
                             f"another shape, dtype or layout, e.g. saved by an older marlkit)")

    def _first_unfit_field(self, state: dict) -> str | None:
        saved_keys = state["transition_data"].keys() | state["episode_data"].keys()
        if saved_keys != self.fields.keys():
            return sorted(saved_keys ^ self.fields.keys())[0]
        return next((key for key in self.fields if not self._saved_fits(state, key)), None)

    def _saved_fits(self, state: dict, key: str) -> bool:
        shape, dtype = self.fields[key]
        if key in self.episode_data:
            value = state["episode_data"][key]
            return isinstance(value, th.Tensor) and value.dtype == dtype and value.shape == (self.buffer_size, *shape)
        episodes, filled_episodes = state["transition_data"][key], state["transition_data"]["filled"]
        return (isinstance(episodes, list) and len(episodes) == state["episodes_in_buffer"]
                and all(isinstance(episode, th.Tensor) and episode.dtype == dtype and episode.shape[1:] == shape
                        and len(episode) == len(filled) <= self.max_seq_length
                        for episode, filled in zip(episodes, filled_episodes)))

    def __repr__(self) -> str:
        return (f"ReplayBuffer. {self.episodes_in_buffer}/{self.buffer_size} episodes. "
                f"Keys:{list(self.scheme)} Groups:{list(self.groups)}")


class PrioritizedReplayBuffer(ReplayBuffer):
    """PyMARL2's prioritized replay (use_per): episodes are drawn with probability p_i^alpha / sum_j p_j^alpha
    and weighted by (N * P(i))^-beta / max_j (N * P(j))^-beta to correct for it; beta grows linearly
    from per_beta to 1 over t_max env steps. New episodes get the highest priority seen so far, and
    the learner's TD errors (or returns) of each sampled batch become its episodes' new priorities.

    PyMARL2 keeps p^alpha in sum and min segment trees; here they are one array, whose cumulative sum
    (5000 episodes: microseconds) finds the same episodes for the same random numbers: the drawing
    is stratified like PyMARL2's, one point uniform in each of batch_size equal slices of the total
    mass, drawn with python's `random` as there.
    """

    def __init__(self, scheme: dict, groups: dict, buffer_size: int, max_seq_length: int, alpha: float,
                 beta: float, t_max: int, preprocess: dict | None = None, device: str = "cpu"):
        super().__init__(scheme, groups, buffer_size, max_seq_length, preprocess=preprocess, device=device)
        self.alpha = alpha
        self.beta_start = beta
        self.beta = beta
        self.beta_increment = (1.0 - beta) / t_max
        self.max_priority = 1.0
        self.weighted_priorities = np.zeros(buffer_size, dtype=np.float64)  # p_i^alpha per slot

    def _store(self, steps: dict, constants: dict, length: int) -> None:
        self.weighted_priorities[self.buffer_index] = self.max_priority ** self.alpha
        super()._store(steps, constants, length)

    def sample(self, batch_size: int, t_env: int) -> tuple[EpisodeBatch, np.ndarray, np.ndarray]:
        """(batch, the slots drawn [batch_size], their importance weights [batch_size]); slots may repeat."""
        if not self.can_sample(batch_size):
            raise ValueError(f"cannot sample {batch_size} episodes: the buffer holds only "
                             f"{self.episodes_in_buffer}; check can_sample() first")
        self.beta = self.beta_start + t_env * self.beta_increment
        stored = self.weighted_priorities[:self.episodes_in_buffer]  # [n]
        cumulative = np.cumsum(stored)  # [n]
        slice_mass = cumulative[-1] / batch_size
        masses = [(random.random() + i) * slice_mass for i in range(batch_size)]
        slots = np.minimum(np.searchsorted(cumulative, masses, side="right"), self.episodes_in_buffer - 1)
        probabilities = stored / cumulative[-1]  # [n]
        max_weight = (probabilities.min() * self.episodes_in_buffer) ** -self.beta
        weights = (probabilities[slots] * self.episodes_in_buffer) ** -self.beta / max_weight  # [batch_size]
        return self._gather(slots), slots, weights

    def update_priorities(self, slots: np.ndarray, priorities: np.ndarray) -> None:
        """New priorities (> 0) for the episodes in `slots`, in order (a repeated slot keeps its last)."""
        priorities = np.asarray(priorities, dtype=np.float64)
        if len(slots) != len(priorities) or np.any(priorities <= 0):
            raise ValueError("update_priorities needs one positive priority per slot")
        self.weighted_priorities[slots] = priorities ** self.alpha
        self.max_priority = max(self.max_priority, float(priorities.max()))

    def state_dict(self) -> dict:
        return {**super().state_dict(), "weighted_priorities": th.from_numpy(self.weighted_priorities.copy()),
                "max_priority": self.max_priority}

    def load_state_dict(self, state: dict) -> None:
        if "weighted_priorities" not in state:
            raise ValueError("the saved replay buffer has no priorities (saved with use_per=False)")
        super().load_state_dict(state)
        self.weighted_priorities[:] = state["weighted_priorities"].numpy()
        self.max_priority = state["max_priority"]
