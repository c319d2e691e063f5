"""EpisodeBatch / ReplayBuffer: allocation from a scheme, writes, views and the replay ring."""
import numpy as np
import pytest
import torch as th

from components.episode_buffer import EpisodeBatch, ReplayBuffer
from components.transforms import OneHot

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
    assert batch["filled"].shape == (2, T, 1) and batch["filled"].dtype == th.long
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


def buffer_tags(buffer: ReplayBuffer) -> list[float]:
    return buffer["map_id"][:, 0].tolist()


def test_replay_buffer_ring_insertion_wraps_around():
    buffer = ReplayBuffer(make_scheme(), GROUPS, buffer_size=5, max_seq_length=T, preprocess=PREPROCESS)
    assert buffer.episodes_in_buffer == 0 and not buffer.can_sample(1)

    buffer.insert_episode_batch(episodes(2, first_tag=1.0))
    assert (buffer.buffer_index, buffer.episodes_in_buffer) == (2, 2)
    buffer.insert_episode_batch(episodes(3, first_tag=3.0))
    assert (buffer.buffer_index, buffer.episodes_in_buffer) == (0, 5)  # exactly full: index wraps
    assert buffer_tags(buffer) == [1.0, 2.0, 3.0, 4.0, 5.0]

    buffer.insert_episode_batch(episodes(1, first_tag=6.0))
    assert buffer_tags(buffer) == [6.0, 2.0, 3.0, 4.0, 5.0]  # the oldest was overwritten
    assert (buffer.buffer_index, buffer.episodes_in_buffer) == (1, 5)


def test_replay_buffer_batch_straddling_the_end_is_split():
    buffer = ReplayBuffer(make_scheme(), GROUPS, buffer_size=5, max_seq_length=T, preprocess=PREPROCESS)
    buffer.insert_episode_batch(episodes(4, first_tag=1.0))
    source = episodes(3, first_tag=10.0)
    buffer.insert_episode_batch(source)  # rows 4, 0, 1
    assert buffer_tags(buffer) == [11.0, 12.0, 3.0, 4.0, 10.0]
    assert (buffer.buffer_index, buffer.episodes_in_buffer) == (2, 5)
    # Transition data, the filled mask and the one-hot actions travel with each episode.
    for src_row, buf_row in [(0, 4), (1, 0), (2, 1)]:
        assert th.equal(buffer["state"][buf_row], source["state"][src_row])
        assert th.equal(buffer["filled"][buf_row], source["filled"][src_row])
        assert th.equal(buffer["actions_onehot"][buf_row], source["actions_onehot"][src_row])
    assert buffer["filled"][:, :, 0].sum(1).tolist() == [2, 3, 3, 1, 1]


def test_replay_buffer_insert_larger_than_buffer_keeps_latest():
    buffer = ReplayBuffer(make_scheme(), GROUPS, buffer_size=3, max_seq_length=T, preprocess=PREPROCESS)
    buffer.insert_episode_batch(episodes(7, first_tag=1.0))
    assert buffer_tags(buffer) == [7.0, 5.0, 6.0]
    assert (buffer.buffer_index, buffer.episodes_in_buffer) == (1, 3)


def test_uniform_sampling_without_replacement():
    np.random.seed(0)
    buffer = ReplayBuffer(make_scheme(), GROUPS, buffer_size=10, max_seq_length=T, preprocess=PREPROCESS)
    buffer.insert_episode_batch(episodes(6, first_tag=0.0))  # tags 0..5 in rows 0..5; rows 6..9 empty
    assert buffer.can_sample(6) and not buffer.can_sample(7)
    with pytest.raises(ValueError, match="holds only 6"):
        buffer.sample(7)

    counts = np.zeros(6)
    for _ in range(3000):
        sample = buffer.sample(3)
        tags = sample["map_id"][:, 0].long().tolist()
        assert sample.batch_size == 3 and len(set(tags)) == 3  # no episode twice
        for tag in tags:
            assert th.equal(sample["state"][tags.index(tag)], buffer["state"][tag])
            counts[tag] += 1
    # Each stored episode is drawn with probability 3/6 per sample: 1500 expected, sd ~27.
    assert np.all(np.abs(counts - 1500) < 150), counts

    full = buffer.sample(6)  # asking for everything returns the stored episodes in order
    assert full["map_id"][:, 0].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
