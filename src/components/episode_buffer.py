"""Dense storage for batches of episodes, and the replay buffer built on it.

A *scheme* describes the fields, e.g.::

    {"obs": {"vshape": obs_dim, "group": "agents"},
     "actions": {"vshape": (1,), "group": "agents", "dtype": th.long},
     "state": {"vshape": state_dim}}

with groups = {"agents": n_agents}. A field with "group" gets one row per group member.
Per-step fields ("transition data") are stored as [batch, time, *shape]; fields marked
"episode_const" ("episode data") have no time dim: [batch, *shape]. The reserved field
"filled" [batch, time, 1] is 1 where a step holds real data, so learners can mask the
padding of episodes that ended before max_seq_length.
"""
from numbers import Integral
from types import SimpleNamespace

import numpy as np
import torch as th

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
        self.scheme["filled"] = {"vshape": (1,), "dtype": th.long}

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

        With mark_filled, "filled" is set to 1 for the written (bs, ts) the first time a
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


class ReplayBuffer(EpisodeBatch):
    """A ring of `buffer_size` episodes: new episodes overwrite the oldest once it is full."""

    def __init__(self, scheme: dict, groups: dict, buffer_size: int, max_seq_length: int,
                 preprocess: dict | None = None, device: str = "cpu"):
        super().__init__(scheme, groups, buffer_size, max_seq_length, preprocess=preprocess,
                         device=device)
        self.buffer_size = buffer_size  # == batch_size, named for readability
        self.buffer_index = 0  # next row to write
        self.episodes_in_buffer = 0

    @staticmethod
    def bytes_needed(scheme: dict, groups: dict, buffer_size: int, max_seq_length: int,
                     preprocess: dict | None = None) -> int:
        """Bytes the storage of a buffer with these arguments takes: buffer_size times one episode's
        (every field, preprocess outputs and "filled" included), found without allocating the buffer."""
        episode = EpisodeBatch(scheme, groups, 1, max_seq_length, preprocess=preprocess)
        stores = (episode.data.transition_data, episode.data.episode_data)
        return buffer_size * sum(value.element_size() * value.numel() for store in stores for value in store.values())

    def insert_episode_batch(self, ep_batch: EpisodeBatch) -> None:
        space_left = self.buffer_size - self.buffer_index
        if ep_batch.batch_size > space_left:
            # The batch straddles the end of the ring: fill up to the end, then wrap to row 0.
            self.insert_episode_batch(ep_batch[0:space_left, :])
            self.insert_episode_batch(ep_batch[space_left:, :])
            return

        rows = slice(self.buffer_index, self.buffer_index + ep_batch.batch_size)
        # ep_batch carries its own "filled" mask, so copy it rather than marking all steps.
        self.update(ep_batch.data.transition_data, rows, slice(0, ep_batch.max_seq_length),
                    mark_filled=False)
        self.update(ep_batch.data.episode_data, rows)
        self.buffer_index += ep_batch.batch_size
        self.episodes_in_buffer = max(self.episodes_in_buffer, self.buffer_index)
        self.buffer_index %= self.buffer_size

    def can_sample(self, batch_size: int) -> bool:
        return self.episodes_in_buffer >= batch_size

    def sample(self, batch_size: int) -> EpisodeBatch:
        """`batch_size` distinct episodes drawn uniformly from those stored."""
        if not self.can_sample(batch_size):
            raise ValueError(f"cannot sample {batch_size} episodes: the buffer holds only "
                             f"{self.episodes_in_buffer}; check can_sample() first")
        if self.episodes_in_buffer == batch_size:
            return self[:batch_size]
        episode_ids = np.random.choice(self.episodes_in_buffer, batch_size, replace=False)
        return self[episode_ids]

    def __repr__(self) -> str:
        return (f"ReplayBuffer. {self.episodes_in_buffer}/{self.buffer_size} episodes. "
                f"Keys:{list(self.scheme)} Groups:{list(self.groups)}")
