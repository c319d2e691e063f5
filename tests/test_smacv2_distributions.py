"""SMACv2's capability distributions (envs/starcraft/interface/distributions.py): what each episode draws, with
SMACv2's probabilities and geometry (oxwhirl/smacv2 env/starcraft2/distributions.py), from one seeded
Generator; and the one-line refusal of each bad capability_config."""
import copy
from collections import Counter

import numpy as np
import pytest

from envs.starcraft.interface.distributions import check_capability_config, draw_episode_config, make_distributions

MAP_X = MAP_Y = 32
# SMACv2's start positions (examples/configs/sc2_gen_*.yaml).
START_POSITIONS = {"dist_type": "surrounded_and_reflect", "p": 0.5, "map_x": MAP_X, "map_y": MAP_Y}


def zerg_config(n_units: int = 5, n_enemies: int = 5, **team_gen) -> dict:
    """SMACv2's zerg capability_config (sc2_gen_zerg.yaml), team_gen settings replaced by `team_gen`."""
    return {"n_units": n_units, "n_enemies": n_enemies,
            "team_gen": {"dist_type": "weighted_teams", "unit_types": ["zergling", "baneling", "hydralisk"],
                         "weights": [0.45, 0.1, 0.45], "exception_unit_types": ["baneling"], "observe": True,
                         **team_gen},
            "start_positions": dict(START_POSITIONS)}


def protoss_config(n_units: int = 5, n_enemies: int = 5) -> dict:
    return {"n_units": n_units, "n_enemies": n_enemies,
            "team_gen": {"dist_type": "weighted_teams", "unit_types": ["stalker", "zealot", "colossus"],
                         "weights": [0.45, 0.45, 0.1], "observe": True},
            "start_positions": dict(START_POSITIONS)}


def draws(config: dict, n: int, seed: int = 0, map_name: str = "10gen_zerg") -> list[dict]:
    check_capability_config(config, map_name)
    distributions = make_distributions(config, np.random.default_rng(seed))
    return [draw_episode_config(distributions) for _ in range(n)]


def chi_square(counts: np.ndarray, probabilities: np.ndarray) -> float:
    expected = counts.sum() * probabilities
    return float(((counts - expected) ** 2 / expected).sum())


# Chi-square values exceeded with probability 0.001 (2 and 4 degrees of freedom).
CHI2_999 = {2: 13.82, 4: 18.47}


def test_episode_config_has_smacv2s_reset_config_format():
    episode = draws(zerg_config(4, 6), 1)[0]
    assert set(episode) == {"team_gen", "ally_start_positions", "enemy_start_positions"}
    assert set(episode["team_gen"]) == {"ally_team", "enemy_team", "id"}
    assert len(episode["team_gen"]["ally_team"]) == 4 and len(episode["team_gen"]["enemy_team"]) == 6
    assert all(type(name) is str for name in episode["team_gen"]["ally_team"])
    assert episode["ally_start_positions"]["item"].shape == (4, 2)
    assert episode["enemy_start_positions"]["item"].shape == (6, 2)
    assert episode["ally_start_positions"]["id"] == episode["enemy_start_positions"]["id"] == 0


def test_team_frequencies_follow_the_weights():
    teams = [episode["team_gen"]["ally_team"] for episode in draws(protoss_config(), 2000, map_name="10gen_protoss")]
    counts = Counter(name for team in teams for name in team)
    observed = np.array([counts["stalker"], counts["zealot"], counts["colossus"]])
    assert observed.sum() == 10000
    assert chi_square(observed, np.array([0.45, 0.45, 0.1])) < CHI2_999[2]
    # The test can fail: the same counts are far from uniform weights.
    assert chi_square(observed, np.full(3, 1 / 3)) > CHI2_999[2]


def test_enemies_mirror_the_allies_extra_ones_drawn_as_a_second_team_fewer_ones_cut():
    for episode in draws(zerg_config(5, 7), 300):
        ally, enemy = episode["team_gen"]["ally_team"], episode["team_gen"]["enemy_team"]
        assert enemy[:5] == ally and len(enemy) == 7
        assert set(enemy[5:]) != {"baneling"}  # the extra two are a team of their own: never banelings only
    for episode in draws(zerg_config(5, 3), 50):
        assert episode["team_gen"]["enemy_team"] == episode["team_gen"]["ally_team"][:3]


def test_a_team_of_exception_units_only_is_redrawn():
    # Banelings weighted 0.8: without the rule, 64% of two-unit teams would be two banelings.
    config = zerg_config(2, 3, weights=[0.1, 0.8, 0.1])
    episodes = draws(config, 2000)
    teams = [tuple(sorted(episode["team_gen"]["ally_team"])) for episode in episodes]
    assert ("baneling", "baneling") not in teams
    # Redrawing the whole team keeps the other teams' relative odds: one baneling in 0.32 / 0.36 of them.
    with_one = sum("baneling" in team for team in teams) / len(teams)
    assert abs(with_one - 0.32 / 0.36) < 0.03
    # The single extra enemy is a one-unit team, so never a baneling either.
    assert all(episode["team_gen"]["enemy_team"][2] != "baneling" for episode in episodes)


def test_all_teams_draws_multisets_uniformly_without_exception_only_teams():
    config = zerg_config(2, 2, dist_type="all_teams")
    del config["team_gen"]["weights"]
    episodes = draws(config, 1500)
    teams = Counter(tuple(sorted(episode["team_gen"]["ally_team"])) for episode in episodes)
    assert ("baneling", "baneling") not in teams and len(teams) == 5  # 6 multisets of 2 from 3 types, less one
    assert chi_square(np.array(list(teams.values())), np.full(5, 1 / 5)) < CHI2_999[4]
    assert all(episode["team_gen"]["enemy_team"] == episode["team_gen"]["ally_team"] for episode in episodes)
    ids = {tuple(sorted(episode["team_gen"]["ally_team"])): episode["team_gen"]["id"] for episode in episodes}
    assert sorted(ids.values()) == [0, 1, 2, 4, 5]  # combinations_with_replacement order: (baneling, baneling) is 3


def reflect_config(n_units: int, n_enemies: int) -> dict:
    config = zerg_config(n_units, n_enemies)
    config["start_positions"] = {"dist_type": "reflect_position", "map_x": MAP_X, "map_y": MAP_Y}
    return config


@pytest.mark.parametrize("n_units, n_enemies", [(5, 5), (5, 8), (6, 4)])
def test_reflected_positions(n_units, n_enemies):
    for episode in draws(reflect_config(n_units, n_enemies), 200):
        allies = episode["ally_start_positions"]["item"]
        enemies = episode["enemy_start_positions"]["item"]
        assert allies.shape == (n_units, 2) and enemies.shape == (n_enemies, 2)
        assert (allies[:, 0] >= 0).all() and (allies[:, 0] < MAP_X / 2 - 1).all()
        assert (allies[:, 1] >= 0).all() and (allies[:, 1] <= MAP_Y).all()
        mirrored = min(n_units, n_enemies)
        np.testing.assert_allclose(enemies[:mirrored, 0], MAP_X - allies[:mirrored, 0])
        np.testing.assert_array_equal(enemies[:mirrored, 1], allies[:mirrored, 1])
        extra = enemies[mirrored:]
        assert (extra[:, 0] >= MAP_X / 2).all() and (extra[:, 0] <= MAP_X).all()
        assert (extra[:, 1] >= 0).all() and (extra[:, 1] <= MAP_Y).all()


def surrounded_config(n_enemies: int) -> dict:
    config = zerg_config(5, n_enemies)
    config["start_positions"] = {"dist_type": "surrounded", "map_x": MAP_X, "map_y": MAP_Y}
    return config


def test_surrounded_positions():
    centre = np.array([MAP_X / 2, MAP_Y / 2])
    groups_seen = Counter()
    for episode in draws(surrounded_config(12), 400):
        np.testing.assert_array_equal(episode["ally_start_positions"]["item"], np.tile(centre, (5, 1)))
        enemies = episode["enemy_start_positions"]["item"]
        assert enemies.shape == (12, 2)
        offset = enemies - centre  # [enemies, 2]
        # On a diagonal, between the corner and 2 short of the centre on each axis.
        np.testing.assert_allclose(np.abs(offset[:, 0]), np.abs(offset[:, 1]))
        assert ((np.abs(offset) >= 2 - 1e-9) & (np.abs(offset) <= MAP_X / 2)).all()
        groups = np.unique(enemies, axis=0)
        diagonals = {tuple(np.sign(point - centre)) for point in groups}
        assert len(diagonals) == len(groups) <= 4  # one group per diagonal
        groups_seen[len(groups)] += 1
    assert set(groups_seen) == {1, 2, 3, 4}


def test_surrounded_and_reflect_reflects_with_probability_p():
    config = zerg_config()
    config["start_positions"]["p"] = 0.3
    episodes = draws(config, 2000)
    surrounded = [bool((episode["ally_start_positions"]["item"] == MAP_X / 2).all()) for episode in episodes]
    assert abs(1 - np.mean(surrounded) - 0.3) < 0.04
    for p in (0.0, 1.0):
        config["start_positions"]["p"] = p
        reflected = [episode["ally_start_positions"]["item"][0, 0] < MAP_X / 2 - 1 for episode in draws(config, 50)]
        assert all(reflected) if p == 1.0 else not any(reflected)


def test_same_seed_same_episodes_other_seed_other_episodes():
    config = zerg_config(5, 7)
    config["enemy_mask"] = {"dist_type": "mask", "mask_probability": 0.5}
    first, again, other = draws(config, 20, seed=3), draws(config, 20, seed=3), draws(config, 20, seed=4)

    def summary(episodes):
        return [(e["team_gen"]["ally_team"], e["team_gen"]["enemy_team"], e["ally_start_positions"]["item"].tolist(),
                 e["enemy_start_positions"]["item"].tolist(), e["enemy_mask"]["item"].tolist()) for e in episodes]
    assert summary(first) == summary(again)
    assert summary(first) != summary(other)


def test_mask_per_agent_uniform_and_fixed():
    config = zerg_config(4, 6)
    config.update(enemy_mask={"dist_type": "mask", "mask_probability": 0.25, "n_enemies": 99},  # overwritten
                  attack={"dist_type": "per_agent_uniform", "lower_bound": [0.5], "upper_bound": [1.0], "observe": True})
    fixed = {**config, "attack": {"dist_type": "fixed", "items": [[1, 2, 3, 4], [5, 6, 7, 8]], "test_mode": True,
                                  "observe": False}}
    original = copy.deepcopy(config)
    episodes = draws(config, 500)
    assert config == original  # make_distributions works on copies
    masks = np.array([episode["enemy_mask"]["item"] for episode in episodes])  # [episodes, units, enemies]
    assert masks.shape == (500, 4, 6) and set(np.unique(masks)) == {0, 1}
    assert abs(masks.mean() - 0.75) < 0.02
    attack = np.array([episode["attack"]["item"] for episode in episodes])  # [episodes, units, 1]
    assert attack.shape == (500, 4, 1) and (attack >= 0.5).all() and (attack < 1.0).all()
    episodes = draws(fixed, 50)
    assert [episode["attack"]["id"] for episode in episodes[:4]] == [0, 1, 0, 1]  # test_mode: in turn
    assert sorted(episodes[1]["attack"]["item"]) == [5, 6, 7, 8]
    assert len({tuple(episode["attack"]["item"]) for episode in episodes}) > 2  # shuffled


# ---- bad input: one line naming the key --------------------------------------------------------

def with_changes(change) -> dict:
    config = zerg_config()
    change(config)
    return config


BAD_CONFIGS = [
    (lambda c: c["team_gen"].update(dist_type="weighted"), "capability_config.team_gen.dist_type", "weighted_teams"),
    (lambda c: c["team_gen"].update(dist_type="mask"), "capability_config.team_gen.dist_type", "all_teams"),
    (lambda c: c["team_gen"]["unit_types"].__setitem__(0, "zergeling"), "unit_types", "zergling, hydralisk, baneling"),
    (lambda c: c["team_gen"]["unit_types"].__setitem__(0, "stalker"), "unit_types", "not a zerg unit"),
    (lambda c: c["team_gen"].update(weights=[0.5, 0.5]), "capability_config.team_gen.weights", "one weight per"),
    (lambda c: c["team_gen"].update(weights=[0.5, 0.4, 0.4]), "capability_config.team_gen.weights", "sum to 1"),
    (lambda c: c["team_gen"].update(weights=[1.2, -0.1, -0.1]), "capability_config.team_gen.weights", "at least 0"),
    (lambda c: c["team_gen"].update(exception_unit_types=["roach"]), "exception_unit_types", "some of unit_types"),
    (lambda c: c["team_gen"].update(weights=[0.0, 1.0, 0.0]), "exception_unit_types", "no team could be drawn"),
    (lambda c: c["team_gen"].update(dist_type="all_teams") or c.update(n_enemies=6), "n_enemies", "all_teams"),
    (lambda c: c["team_gen"].pop("observe"), "capability_config.team_gen.observe", "is missing"),
    (lambda c: c["team_gen"].pop("weights"), "capability_config.team_gen.weights", "is missing"),
    (lambda c: c["team_gen"].update(weigths=[1]), "capability_config.team_gen.weigths", "weights"),
    (lambda c: c.pop("team_gen"), "capability_config.team_gen", "missing"),
    (lambda c: c.pop("n_units"), "capability_config.n_units", "missing"),
    (lambda c: c.pop("n_enemies"), "capability_config.n_enemies", "missing"),
    (lambda c: c.update(n_units=0), "capability_config.n_units=0", "at least 1"),
    (lambda c: c.update(n_enemies=-2), "capability_config.n_enemies=-2", "at least 1"),
    (lambda c: c.update(n_units=2.5), "capability_config.n_units=2.5", "whole number"),
    (lambda c: c.update(n_agents=5), "capability_config.n_agents", "team_gen, start_positions"),
    (lambda c: c["start_positions"].update(p=1.5), "capability_config.start_positions.p", "[0, 1]"),
    (lambda c: c["start_positions"].update(p=-0.1), "capability_config.start_positions.p", "[0, 1]"),
    (lambda c: c["start_positions"].update(map_x=64), "capability_config.start_positions.map_x", "32"),
    (lambda c: c["start_positions"].update(map_y=16), "capability_config.start_positions.map_y", "32"),
    (lambda c: c["start_positions"].update(dist_type="random"), "capability_config.start_positions.dist_type",
     "fixed, all_teams, weighted_teams, per_agent_uniform, mask, reflect_position, surrounded, surrounded_and_reflect"),
    (lambda c: c.update(enemy_mask={"dist_type": "mask", "mask_probability": 2}), "enemy_mask.mask_probability",
     "[0, 1]"),
    (lambda c: c.update(attack={"dist_type": "per_agent_uniform", "lower_bound": [0, 0], "upper_bound": [1],
                                "observe": True}), "capability_config.attack.lower_bound", "same length"),
    (lambda c: c.update(attack={"dist_type": "fixed", "items": [[1, 2]], "test_mode": False, "observe": True}),
     "capability_config.attack.items", "n_units=5"),
    (lambda c: c.update(health={"dist_type": "per_agent_uniform", "lower_bound": [0], "upper_bound": [0.5],
                                "observe": True}), "capability_config.health", "not supported"),
]


@pytest.mark.parametrize("change, key, allowed", BAD_CONFIGS)
def test_bad_capability_config_is_refused_in_one_line(change, key, allowed):
    with pytest.raises(ValueError) as error:
        check_capability_config(with_changes(change), "10gen_zerg")
    message = str(error.value)
    assert key in message and allowed in message and "\n" not in message


@pytest.mark.parametrize("map_name, n_units, n_enemies, ok", [
    ("zerg_10_vs_11", 10, 11, True), ("zerg_10_vs_11", 10, 10, False), ("zerg_10_vs_11", 5, 11, False),
    ("10gen_zerg", 7, 3, True),
])
def test_a_scenario_name_fixes_the_army_sizes(map_name, n_units, n_enemies, ok):
    config = zerg_config(n_units, n_enemies)
    if ok:
        check_capability_config(config, map_name)
    else:
        with pytest.raises(ValueError, match=f"does not match the scenario {map_name} .*sc2_gen_zerg"):
            check_capability_config(config, map_name)


def test_a_map_that_is_not_smacv2s_is_refused():
    with pytest.raises(ValueError, match="'3m' is not a SMACv2 map"):
        check_capability_config(zerg_config(), "3m")
    with pytest.raises(ValueError, match="'marine' is not a protoss unit"):
        check_capability_config(zerg_config(unit_types=["marine"], weights=[1.0], exception_unit_types=[]),
                                "10gen_protoss")
