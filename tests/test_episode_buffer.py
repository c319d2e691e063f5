"""EpisodeBatch / ReplayBuffer: allocation from a scheme, writes, views, the replay ring, its compact
storage (checked against the old dense padded layout) and its checkpoints."""
import os

import numpy as np
import pytest
import torch as th
import torch.nn.functional as F

from components.episode_buffer import TENSOR_OVERHEAD_BYTES, EpisodeBatch, ReplayBuffer, stored_lengths
from components.transforms import OneHot
from run import checkpoint
from run.run import build_scheme

th.set_num_threads(1)

N_AGENTS, N_ACTIONS, OBS, STATE, T = 3, 5, 4, 6, 7
GROUPS = {"agents": N_AGENTS}
PREPROCESS = {"actions": ("actions_onehot", [OneHot(out_dim=N_ACTIONS)])}


def make_scheme() -> dict:
    return {
        "state": {"vshape": STATE},
        "obs": {"vshape": OBS, "group": "agents"},
        "actions": {"vshape": (1,), "group": "agents", "dtype": th.long},
        "avail_actions": {"vshape": (N_ACTIONS,), "group": "agents", "dtype": th.int},
        "reward": {"vshape": (1,)},
        "terminated": {"vshape": (1,), "dtype": th.uint8},
        "map_id": {"vshape": (2,), "episode_const": True},
    }


def make_batch(batch_size: int = 2, max_t: int = T) -> EpisodeBatch:
    return EpisodeBatch(make_scheme(), GROUPS, batch_size, max_t, preprocess=PREPROCESS)


def fill_episode(batch: EpisodeBatch, row: int, length: int, tag: float) -> None:
    """Writes `length` steps into `row`, with state values derived from `tag` to identify it."""
    for t in range(length):
        batch.update({"state": [np.full(STATE, tag + t)],
                      "actions": [[(t + a) % N_ACTIONS for a in range(N_AGENTS)]],
                      "reward": [(tag,)]}, bs=row, ts=t)
    batch.update({"map_id": [[tag, -tag]]}, bs=row)


def test_scheme_allocates_shapes_dtypes_and_preprocess_fields():
    scheme = make_scheme()
    batch = EpisodeBatch(scheme, GROUPS, 2, T, preprocess=PREPROCESS)
    assert batch["obs"].shape == (2, T, N_AGENTS, OBS)
    assert batch["state"].shape == (2, T, STATE)
    assert batch["actions"].dtype == th.long
    assert batch["actions_onehot"].shape == (2, T, N_AGENTS, N_ACTIONS)
    assert batch["actions_onehot"].dtype == th.float32
    assert batch["filled"].shape == (2, T, 1) and batch["filled"].dtype == th.bool
    assert batch["map_id"].shape == (2, 2)  # episode_const: no time dim
    assert "map_id" in batch.data.episode_data and "obs" in batch.data.transition_data
    assert batch.scheme["actions_onehot"]["group"] == "agents"
    assert "filled" not in scheme and "actions_onehot" not in scheme  # caller's scheme untouched


def test_bad_scheme_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="reserved"):
        EpisodeBatch({"filled": {"vshape": 1}}, {}, 1, 2)
    with pytest.raises(ValueError, match="group 'agents'"):
        EpisodeBatch({"obs": {"vshape": 2, "group": "agents"}}, {}, 1, 2)
    with pytest.raises(ValueError, match="vshape"):
        EpisodeBatch({"obs": {}}, {}, 1, 2)
    with pytest.raises(ValueError, match="preprocess key 'actions'"):
        EpisodeBatch({"obs": {"vshape": 2}}, {}, 1, 2, preprocess=PREPROCESS)
    batch = make_batch()
    with pytest.raises(KeyError, match="'nope'"):
        batch.update({"nope": [1.0]}, bs=0, ts=0)
    with pytest.raises(KeyError, match="'nope'"):
        batch["nope"]
    with pytest.raises(ValueError, match="cannot write data of shape"):
        batch.update({"state": [np.zeros(STATE + 1)]}, bs=0, ts=0)
    with pytest.raises(IndexError, match="contiguous"):
        batch[0, [0, 2]]


def test_update_time_slice_marks_filled_and_one_hots_actions():
    batch = make_batch()
    batch.update({"actions": [[[1], [4], [0]]]}, bs=1, ts=2)
    assert batch["filled"][:, :, 0].tolist() == [[0] * T, [0, 0, 1, 0, 0, 0, 0]]
    assert batch["actions"][1, 2, :, 0].tolist() == [1, 4, 0]
    expected = th.zeros(N_AGENTS, N_ACTIONS)
    expected[0, 1] = expected[1, 4] = expected[2, 0] = 1
    assert th.equal(batch["actions_onehot"][1, 2], expected)
    assert batch["actions_onehot"].sum() == N_AGENTS  # nothing else written

    batch.update({"reward": [(5.0,)]}, bs=0, ts=3, mark_filled=False)
    assert batch["reward"][0, 3, 0] == 5.0
    assert batch["filled"][0].sum() == 0


def test_update_whole_batch_over_several_steps():
    batch = make_batch(batch_size=2)
    obs = np.arange(2 * 3 * N_AGENTS * OBS, dtype=np.float32).reshape(2, 3, N_AGENTS, OBS)
    batch.update({"obs": obs}, ts=slice(1, 4))
    assert th.equal(batch["obs"][:, 1:4], th.as_tensor(obs))
    assert batch["obs"][:, 0].abs().sum() == 0
    assert batch["filled"][:, :, 0].tolist() == [[0, 1, 1, 1, 0, 0, 0]] * 2
    assert batch.max_t_filled() == 3


def test_update_list_of_episode_rows_like_parallel_runner():
    batch = make_batch(batch_size=4)
    batch.update({"reward": [(1.0,), (3.0,)], "terminated": [(True,), (False,)]}, bs=[0, 2], ts=5)
    assert batch["reward"][:, 5, 0].tolist() == [1.0, 0.0, 3.0, 0.0]
    assert batch["terminated"][:, 5, 0].tolist() == [1, 0, 0, 0]
    assert batch["filled"][:, 5, 0].tolist() == [1, 0, 1, 0]


def test_episode_const_update_ignores_time_and_does_not_mark_filled():
    batch = make_batch()
    batch.update({"map_id": [[7.0, 8.0]]}, bs=1)
    assert batch["map_id"].tolist() == [[0.0, 0.0], [7.0, 8.0]]
    assert batch["filled"].sum() == 0


def test_indexing_by_keys_batch_and_time_slices():
    batch = make_batch(batch_size=3)
    for row in range(3):
        fill_episode(batch, row, length=row + 2, tag=10.0 * row)

    sub = batch["state", "map_id", "actions"]
    assert isinstance(sub, EpisodeBatch)
    assert set(sub.data.transition_data) == {"state", "actions"}
    assert set(sub.data.episode_data) == {"map_id"}
    assert sub.groups == GROUPS
    assert sub["state"] is batch["state"]

    rows = batch[1:3]
    assert rows.batch_size == 2 and rows.max_seq_length == T
    assert rows["state"][0, 0, 0] == 10.0 and rows["map_id"][1].tolist() == [20.0, -20.0]

    one = batch[1]  # an int keeps the batch dim
    assert one.batch_size == 1 and one["state"].shape == (1, T, STATE)

    window = batch[0:2, 1:3]
    assert window.batch_size == 2 and window.max_seq_length == 2
    assert window["state"][:, :, 0].tolist() == [[1.0, 0.0], [11.0, 12.0]]  # row 0 has 2 steps
    assert window["actions_onehot"].shape == (2, 2, N_AGENTS, N_ACTIONS)
    window["state"][0, 0, 0] = -1.0  # slice views share storage with the batch
    assert batch["state"][0, 1, 0] == -1.0

    picked = batch[[2, 0]]  # a list of episode ids selects (copies) in that order
    assert picked.batch_size == 2
    assert picked["map_id"][:, 0].tolist() == [20.0, 0.0]
    assert batch.max_t_filled() == 4 and batch[0:2].max_t_filled() == 3

    truncated = batch[:, :batch.max_t_filled()]
    assert truncated.max_seq_length == 4 and truncated["filled"][:, :, 0].sum(1).tolist() == [2, 3, 4]


def test_to_device_moves_all_storage():
    batch = make_batch()
    fill_episode(batch, 0, length=2, tag=1.0)
    moved = batch.to("cpu")
    assert moved is batch and batch.device == "cpu"
    assert all(v.device.type == "cpu" for v in batch.data.transition_data.values())
    assert all(v.device.type == "cpu" for v in batch.data.episode_data.values())
    if th.cuda.is_available():
        batch.to("cuda")
        assert batch["state"].is_cuda and batch["map_id"].is_cuda and batch.device == "cuda"


def episodes(n: int, first_tag: float, max_t: int = T) -> EpisodeBatch:
    """n episodes tagged first_tag, first_tag + 1, ...; episode i has i % 3 + 1 steps."""
    batch = make_batch(batch_size=n, max_t=max_t)
    for row in range(n):
        fill_episode(batch, row, length=row % 3 + 1, tag=first_tag + row)
    return batch


def make_buffer(buffer_size: int) -> ReplayBuffer:
    return ReplayBuffer(make_scheme(), GROUPS, buffer_size=buffer_size, max_seq_length=T, preprocess=PREPROCESS)


def buffer_tags(buffer: ReplayBuffer) -> list[float]:
    return buffer.episode_data["map_id"][:, 0].tolist()


def test_stored_lengths_end_at_the_last_filled_step():
    filled = th.tensor([[1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 0, 1]], dtype=th.bool)  # [batch, time]
    assert stored_lengths(filled.unsqueeze(-1)).tolist() == [2, 0, 4, 4]


def test_replay_buffer_ring_insertion_wraps_around():
    buffer = make_buffer(5)
    assert buffer.episodes_in_buffer == 0 and not buffer.can_sample(1)

    buffer.insert_episode_batch(episodes(2, first_tag=1.0))
    assert (buffer.buffer_index, buffer.episodes_in_buffer) == (2, 2)
    buffer.insert_episode_batch(episodes(3, first_tag=3.0))
    assert (buffer.buffer_index, buffer.episodes_in_buffer) == (0, 5)  # exactly full: index wraps
    assert buffer_tags(buffer) == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert buffer.lengths.tolist() == [1, 2, 1, 2, 3]

    buffer.insert_episode_batch(episodes(1, first_tag=6.0))
    assert buffer_tags(buffer) == [6.0, 2.0, 3.0, 4.0, 5.0]  # the oldest was overwritten
    assert (buffer.buffer_index, buffer.episodes_in_buffer) == (1, 5)


def test_replay_buffer_batch_straddling_the_end_is_split():
    buffer = make_buffer(5)
    buffer.insert_episode_batch(episodes(4, first_tag=1.0))
    source = episodes(3, first_tag=10.0)
    buffer.insert_episode_batch(source)  # rows 4, 0, 1
    assert buffer_tags(buffer) == [11.0, 12.0, 3.0, 4.0, 10.0]
    assert (buffer.buffer_index, buffer.episodes_in_buffer) == (2, 5)
    # Every field, preprocess outputs included, travels with its episode, cut after its last filled step.
    for src_row, buf_row, length in [(0, 4, 1), (1, 0, 2), (2, 1, 3)]:
        for key in ("state", "filled", "actions_onehot"):
            assert th.equal(buffer.transition_data[key][buf_row], source[key][src_row, :length]), key
    assert buffer.lengths.tolist() == [2, 3, 3, 1, 1]


def test_replay_buffer_insert_larger_than_buffer_keeps_latest():
    buffer = make_buffer(3)
    buffer.insert_episode_batch(episodes(7, first_tag=1.0))
    assert buffer_tags(buffer) == [7.0, 5.0, 6.0]
    assert (buffer.buffer_index, buffer.episodes_in_buffer) == (1, 3)


def test_insert_rejects_a_batch_of_another_scheme():
    buffer = make_buffer(3)
    other = EpisodeBatch({**make_scheme(), "state": {"vshape": STATE + 1}}, GROUPS, 1, T, preprocess=PREPROCESS)
    with pytest.raises(ValueError, match="field.s. state are missing or differ"):
        buffer.insert_episode_batch(other)
    with pytest.raises(ValueError, match="episodes of 8 steps into a buffer built for at most 7"):
        buffer.insert_episode_batch(make_batch(max_t=T + 1))


def test_uniform_sampling_without_replacement():
    np.random.seed(0)
    buffer = make_buffer(10)
    buffer.insert_episode_batch(episodes(6, first_tag=0.0))  # tags 0..5 in slots 0..5; slots 6..9 empty
    assert buffer.can_sample(6) and not buffer.can_sample(7)
    with pytest.raises(ValueError, match="holds only 6"):
        buffer.sample(7)

    counts = np.zeros(6)
    for _ in range(3000):
        sample = buffer.sample(3)
        tags = sample["map_id"][:, 0].long().tolist()
        assert sample.batch_size == 3 and len(set(tags)) == 3  # no episode twice
        assert sample.max_seq_length == max(tag % 3 + 1 for tag in tags)  # padded to the longest only
        for row, tag in enumerate(tags):
            stored = buffer.transition_data["state"][tag]  # [length, STATE]
            assert th.equal(sample["state"][row, :len(stored)], stored)
            assert not sample["state"][row, len(stored):].any() and not sample["filled"][row, len(stored):].any()
            counts[tag] += 1
    # Each stored episode is drawn with probability 3/6 per sample: 1500 expected, sd ~27.
    assert np.all(np.abs(counts - 1500) < 150), counts

    full = buffer.sample(6)  # asking for everything returns the stored episodes in order
    assert full["map_id"][:, 0].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


# --- the compact buffer against the old dense layout --------------------------------------------

LIMIT = 8  # episode_limit of the reference checks: episodes keep up to LIMIT + 1 steps


def compact_scheme() -> dict:
    """run.build_scheme's fields and dtypes, plus an episode-constant field."""
    scheme, _, _ = build_scheme({"n_agents": N_AGENTS, "n_actions": N_ACTIONS, "state_shape": STATE, "obs_shape": OBS})
    return {**scheme, "map_id": {"vshape": (2,), "episode_const": True}}


class DenseReplayBuffer(EpisodeBatch):
    """Reference: the replay buffer before compact storage. Every episode padded to max_seq_length in
    [buffer_size, max_seq_length, ...] tensors, with make_scheme()'s long/int dtypes and the float
    actions_onehot preprocess; sample returns the drawn rows cut to the longest filled episode."""

    def __init__(self, buffer_size: int):
        super().__init__(make_scheme(), GROUPS, buffer_size, LIMIT + 1, preprocess=PREPROCESS)
        self.buffer_index = 0
        self.episodes_in_buffer = 0

    def insert_episode_batch(self, ep_batch: EpisodeBatch) -> None:
        space_left = self.batch_size - self.buffer_index
        if ep_batch.batch_size > space_left:
            self.insert_episode_batch(ep_batch[0:space_left, :])
            self.insert_episode_batch(ep_batch[space_left:, :])
            return
        rows = slice(self.buffer_index, self.buffer_index + ep_batch.batch_size)
        self.update(ep_batch.data.transition_data, rows, slice(0, ep_batch.max_seq_length), mark_filled=False)
        self.update(ep_batch.data.episode_data, rows)
        self.buffer_index += ep_batch.batch_size
        self.episodes_in_buffer = max(self.episodes_in_buffer, self.buffer_index)
        self.buffer_index %= self.batch_size

    def sample(self, batch_size: int) -> EpisodeBatch:
        if self.episodes_in_buffer == batch_size:
            sample = self[:batch_size]
        else:
            sample = self[np.random.choice(self.episodes_in_buffer, batch_size, replace=False)]
        return sample[:, :sample.max_t_filled()]


def random_episodes(rng: np.random.Generator, lengths: list[int]) -> list[dict]:
    """Runner-like episodes of the given env-step counts, as numpy arrays of their L + 1 steps."""
    result = []
    for length in lengths:
        steps = length + 1  # the final state row too
        avail = rng.random((steps, N_AGENTS, N_ACTIONS)) < 0.6  # [steps, agents, actions]
        actions = rng.integers(N_ACTIONS, size=(steps, N_AGENTS, 1))  # [steps, agents, 1]
        np.put_along_axis(avail, actions, True, axis=-1)  # the chosen action was available
        terminated = np.zeros((length, 1), dtype=bool)
        terminated[-1] = rng.random() < 0.5
        result.append({"state": rng.standard_normal((steps, STATE)), "obs": rng.standard_normal((steps, N_AGENTS, OBS)),
                       "avail_actions": avail, "actions": actions, "reward": rng.standard_normal((length, 1)),
                       "terminated": terminated, "map_id": rng.standard_normal(2)})
    return result


def write_batch(scheme: dict, preprocess: dict | None, episodes_data: list[dict]) -> EpisodeBatch:
    """The dense batch a runner would hand over: steps 0..L filled, reward/terminated at 0..L-1."""
    batch = EpisodeBatch(scheme, GROUPS, len(episodes_data), LIMIT + 1, preprocess=preprocess)
    for row, episode in enumerate(episodes_data):
        steps = slice(0, len(episode["state"]))
        batch.update({key: episode[key] for key in ("state", "obs", "avail_actions", "actions")}, bs=row, ts=steps)
        batch.update({key: episode[key] for key in ("reward", "terminated")}, bs=row,
                     ts=slice(0, len(episode["reward"])), mark_filled=False)
        batch.update({"map_id": episode["map_id"]}, bs=row)
    return batch


# (episodes inserted, episodes sampled) pairs: first insert 3 then sample all 3 (no random draw), the ring
# wraps, a batch straddles the end, a batch larger than the ring, a sample of the whole full ring.
SCRIPT = [(3, 3), (3, 4), (3, 5), (2, 2), (10, 7), (4, 6), (1, 7)]
BUFFER_SIZE = 7


def run_script(buffer, scheme: dict, preprocess: dict | None) -> list[EpisodeBatch]:
    np.random.seed(11)  # the buffer's draws
    rng = np.random.default_rng(3)  # the episodes: the same for both layouts
    samples = []
    for n_insert, n_sample in SCRIPT:
        lengths = rng.integers(1, LIMIT + 1, size=n_insert).tolist()
        buffer.insert_episode_batch(write_batch(scheme, preprocess, random_episodes(rng, lengths)))
        sample = buffer.sample(n_sample)
        samples.append(sample[np.arange(n_sample)])  # a copy: the dense layout may return a view of its rows
    return samples


def as_float(value: th.Tensor) -> th.Tensor:
    return value.to(th.float64)


def test_compact_buffer_samples_what_the_dense_layout_sampled():
    dense_samples = run_script(DenseReplayBuffer(BUFFER_SIZE), make_scheme(), PREPROCESS)
    dense_rng = np.random.get_state()
    compact = ReplayBuffer(compact_scheme(), GROUPS, BUFFER_SIZE, LIMIT + 1)
    compact_samples = run_script(compact, compact_scheme(), None)
    assert str(np.random.get_state()) == str(dense_rng)  # the same random draws, no more, no fewer
    assert "actions_onehot" not in compact.scheme and compact.transition_data["actions"][0].dtype == th.uint8

    for dense, sample in zip(dense_samples, compact_samples):
        assert (sample.batch_size, sample.max_seq_length) == (dense.batch_size, dense.max_seq_length)
        for key in compact_scheme():
            assert th.equal(as_float(sample[key]), as_float(dense[key])), key
        assert th.equal(sample["filled"], dense["filled"].bool())
        onehot = F.one_hot(sample["actions"][..., 0].long(), N_ACTIONS)  # [batch, time, agents, actions]
        filled = sample["filled"].unsqueeze(-1)  # [batch, time, 1, 1]: no one-hot in the padding
        assert th.equal(as_float(onehot * filled), as_float(dense["actions_onehot"]))


# --- memory --------------------------------------------------------------------------------------

def test_stored_bytes_are_steps_times_bytes_per_step():
    rng = np.random.default_rng(0)
    buffer = ReplayBuffer(compact_scheme(), GROUPS, 20, LIMIT + 1)
    sizes = ReplayBuffer.storage_bytes(compact_scheme(), GROUPS)
    # float32 state, obs, reward; uint8 actions; bool avail_actions, terminated, filled
    assert sizes.step == 4 * (STATE + N_AGENTS * OBS + 1) + N_AGENTS + N_AGENTS * N_ACTIONS + 1 + 1
    constants = 4 * 2  # the float32 [2] episode-constant field
    assert sizes.episode == constants + len(buffer.transition_data) * TENSOR_OVERHEAD_BYTES
    length, n = 5, 12
    buffer.insert_episode_batch(write_batch(compact_scheme(), None, random_episodes(rng, [length] * n)))
    # N episodes of L env steps keep N * (L + 1) steps; episode-constant fields are allocated for all 20 slots.
    assert buffer.stored_bytes() == n * (length + 1) * sizes.step + 20 * constants
    assert sizes.for_episodes(n, length + 1) == n * ((length + 1) * sizes.step + sizes.episode)


# --- checkpoints ---------------------------------------------------------------------------------

def filled_buffer(seed: int) -> ReplayBuffer:
    rng = np.random.default_rng(seed)
    buffer = ReplayBuffer(compact_scheme(), GROUPS, BUFFER_SIZE, LIMIT + 1)
    for n in (4, 5):  # wraps: 9 episodes into 7 slots
        buffer.insert_episode_batch(write_batch(compact_scheme(), None,
                                                random_episodes(rng, rng.integers(1, LIMIT + 1, n).tolist())))
    return buffer


def save_and_load(buffer: ReplayBuffer, folder) -> dict:
    th.save(buffer.state_dict(), os.path.join(folder, checkpoint.BUFFER_FILE))
    return checkpoint.load_file(str(folder), checkpoint.BUFFER_FILE, mmap=True)


def test_checkpoint_round_trip_restores_the_buffer_exactly(tmp_path):
    saved = filled_buffer(seed=1)
    restored = ReplayBuffer(compact_scheme(), GROUPS, BUFFER_SIZE, LIMIT + 1)
    checkpoint.load_buffer_state(restored, save_and_load(saved, tmp_path), str(tmp_path))
    assert (restored.buffer_index, restored.episodes_in_buffer) == (saved.buffer_index, 7)
    assert saved.buffer_index == 2
    assert restored.lengths.tolist() == saved.lengths.tolist()
    assert restored.stored_bytes() == saved.stored_bytes()
    for buffer in (saved, restored):  # both go on alike: the same insert, then the same draw
        buffer.insert_episode_batch(write_batch(compact_scheme(), None, random_episodes(np.random.default_rng(9), [3])))
    np.random.seed(4)
    a = saved.sample(5)
    np.random.seed(4)
    b = restored.sample(5)
    assert a.data.transition_data.keys() == b.data.transition_data.keys()
    for key in a.data.transition_data:
        assert th.equal(a[key], b[key]), key
    assert th.equal(a["map_id"], b["map_id"])
    # The file holds the episodes at their length: about the buffer's real size, not LIMIT + 1 steps each.
    size = os.path.getsize(tmp_path / checkpoint.BUFFER_FILE)
    assert saved.stored_bytes() < size < saved.stored_bytes() + 40_000


def test_checkpoint_of_another_buffer_gives_one_clear_error(tmp_path):
    state = save_and_load(filled_buffer(seed=2), tmp_path)
    folder = str(tmp_path)
    smaller = ReplayBuffer(compact_scheme(), GROUPS, BUFFER_SIZE - 1, LIMIT + 1)
    with pytest.raises(checkpoint.CheckpointError, match=f"^checkpoint {folder}: the saved replay buffer has "
                                                         f"buffer_size=7, this run has buffer_size=6; resume with"):
        checkpoint.load_buffer_state(smaller, state, folder)
    wider = ReplayBuffer({**compact_scheme(), "obs": {"vshape": OBS + 1, "group": "agents"}}, GROUPS, BUFFER_SIZE,
                         LIMIT + 1)
    with pytest.raises(checkpoint.CheckpointError, match=f"^checkpoint {folder}: the saved replay buffer's 'obs' "
                                                         f"does not fit this run's env/config"):
        checkpoint.load_buffer_state(wider, state, folder)
    assert wider.episodes_in_buffer == 0 and wider.transition_data["obs"][0] is None  # nothing was loaded
    dense = DenseReplayBuffer(BUFFER_SIZE)  # a buffer.pt of the old padded layout
    old_state = {"buffer_size": BUFFER_SIZE, "buffer_index": 0, "episodes_in_buffer": BUFFER_SIZE,
                 "transition_data": dict(dense.data.transition_data), "episode_data": dict(dense.data.episode_data)}
    with pytest.raises(checkpoint.CheckpointError, match="'actions_onehot' does not fit .* saved by an older marlkit"):
        checkpoint.load_buffer_state(ReplayBuffer(compact_scheme(), GROUPS, BUFFER_SIZE, LIMIT + 1), old_state, folder)


GROWTH_SCRIPT = """
import gc, sys
sys.path.insert(0, {src!r})
import psutil, torch as th
from components.episode_buffer import EpisodeBatch, ReplayBuffer
from run.run import build_scheme
from utils.allocator import keep_freed_memory
keep_freed_memory()  # as training does
scheme, groups, preprocess = build_scheme({{"n_agents": {agents}, "n_actions": {actions}, "state_shape": {state},
                                           "obs_shape": {obs}}})
n, length = {episodes}, {length}
buffer = ReplayBuffer(scheme, groups, n, length + 1, preprocess=preprocess)
batch = EpisodeBatch(scheme, groups, 8, length + 1, preprocess=preprocess)
batch.data.transition_data["filled"][:] = True
gc.collect()
before = psutil.Process().memory_info().rss
for _ in range(n // 8):
    buffer.insert_episode_batch(batch)
gc.collect()
grown = psutil.Process().memory_info().rss - before
print(grown / ReplayBuffer.storage_bytes(scheme, groups, preprocess).for_episodes(n, length + 1))
"""


@pytest.mark.parametrize("shapes, length, episodes", [
    ({"agents": 2, "actions": 3, "state": 2, "obs": 2}, 1, 40000),        # the matrix game: overhead dominates
    ({"agents": 6, "actions": 30, "state": 282, "obs": 156}, 100, 800),  # corridor: data dominates (0.4 GB)
])
def test_the_memory_estimate_follows_the_measured_growth(shapes, length, episodes):
    """The memory check's estimate (StorageBytes) against the resident memory a buffer really grows by."""
    import subprocess
    import sys
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    script = GROWTH_SCRIPT.format(src=src, length=length, episodes=episodes, **shapes)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    ratio = float(result.stdout.strip().splitlines()[-1])  # measured growth / estimate
    assert 1 / 1.5 <= ratio <= 1.5
