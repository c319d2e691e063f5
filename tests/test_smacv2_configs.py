"""SMACv2's env configs: sc2_gen_<race>[_epo].yaml hold SMACv2's example values (oxwhirl/smacv2
examples/configs/), sc2v2.yaml and smacv2_configs/<scenario>.yaml EPyMARL's (uoe-agents/epymarl
src/config/envs/), loaded and checked by main.py's config building; bad input fails in one line before
the run starts. The expected values are tables written from those published files."""
import inspect
import os

import pytest

import main
from main import InputError, build_config, checked_params, smac_settings
from main_runs import run_main
from utils.config_check import UsageError

# SMACv2's StarCraft2Env.__init__ keyword arguments and defaults (env/starcraft2/starcraft2.py).
SMACV2_ENV_DEFAULTS = dict(
    map_name="8m", step_mul=8, move_amount=2, difficulty="7", game_version=None, seed=None, continuing_episode=False,
    obs_all_health=True, obs_own_health=True, obs_last_action=False, obs_pathing_grid=False, obs_terrain_height=False,
    obs_instead_of_state=False, obs_timestep_number=False, obs_own_pos=False, obs_starcraft=True, conic_fov=False,
    num_fov_actions=12, state_last_action=True, state_timestep_number=False, reward_sparse=False,
    reward_only_positive=True, reward_death_value=10, reward_win=200, reward_defeat=0, reward_negative_scale=0.5,
    reward_scale=True, reward_scale_rate=20, use_unit_ranges=False, min_attack_range=2, kill_unit_step_mul=2,
    fully_observable=False, capability_config={}, replay_dir="", replay_prefix="", window_size_x=1920,
    window_size_y=1200, heuristic_ai=False, heuristic_rest=False, debug=False, prob_obs_enemy=1.0, action_mask=True)
# marlkit's own: the engine (choice, replays, injection) and an opt-in fix of a SMACv2 quirk.
MARLKIT_ENV_ARGS = ("backend", "record_replay", "engine", "hide_only_unobserved_enemies")
# Defaults marlkit's game logic sets otherwise: a 10gen map, not SMAC's 8m; None for "no capabilities".
MARLKIT_DEFAULTS = ("map_name", "capability_config")

# The env_args every examples/configs/sc2_gen_*.yaml of SMACv2 sets alike.
SMACV2_EXAMPLE_ENV_ARGS = dict(
    continuing_episode=False, difficulty="7", game_version=None, move_amount=2, obs_all_health=True,
    obs_instead_of_state=False, obs_last_action=False, obs_own_health=True, obs_pathing_grid=False,
    obs_terrain_height=False, obs_timestep_number=False, reward_death_value=10, reward_defeat=0,
    reward_negative_scale=0.5, reward_only_positive=True, reward_scale=True, reward_scale_rate=20, reward_sparse=False,
    reward_win=200, replay_dir="", replay_prefix="", conic_fov=False, use_unit_ranges=True, min_attack_range=2,
    obs_own_pos=True, num_fov_actions=12, state_last_action=True, state_timestep_number=False, step_mul=8,
    heuristic_ai=False, debug=False)
# Their team_gen per race.
SMACV2_TEAMS = {
    "protoss": {"dist_type": "weighted_teams", "unit_types": ["stalker", "zealot", "colossus"],
                "weights": [0.45, 0.45, 0.1], "observe": True},
    "terran": {"dist_type": "weighted_teams", "unit_types": ["marine", "marauder", "medivac"],
               "weights": [0.45, 0.45, 0.1], "exception_unit_types": ["medivac"], "observe": True},
    "zerg": {"dist_type": "weighted_teams", "unit_types": ["zergling", "baneling", "hydralisk"],
             "weights": [0.45, 0.1, 0.45], "exception_unit_types": ["baneling"], "observe": True},
}
SMACV2_START_POSITIONS = {"dist_type": "surrounded_and_reflect", "p": 0.5, "map_x": 32, "map_y": 32}
# Plain and EPO files differ only here.
SMACV2_OBSERVABILITY = {"": {"prob_obs_enemy": 1.0, "action_mask": True},
                        "_epo": {"prob_obs_enemy": 0.0, "action_mask": False}}
SMACV2_RUN = {"test_nepisode": 32, "test_interval": 10000, "log_interval": 2000, "runner_log_interval": 2000,
              "learner_log_interval": 2000, "t_max": 10050000}
# marlkit's own keys (as sc2.yaml), and SMACv2 arguments its examples leave out, at their defaults.
MARLKIT_ADDED = {"backend": "auto", "seed": None, "heuristic_rest": False, "kill_unit_step_mul": 2,
                 "fully_observable": False}

# EPyMARL's sc2v2.yaml, less env_args.time_limit (its wrapper never passes it on).
EPYMARL_SC2V2 = {"env": "sc2v2", "test_greedy": True, "test_nepisode": 100, "test_interval": 50000,
                 "log_interval": 50000, "runner_log_interval": 10000, "learner_log_interval": 10000, "t_max": 2050000}
SCENARIO_SIZES = {"5_vs_5": (5, 5), "10_vs_10": (10, 10), "20_vs_20": (20, 20), "10_vs_11": (10, 11),
                  "20_vs_23": (20, 23)}
SCENARIOS = [f"{race}_{size}" for race in SMACV2_TEAMS for size in SCENARIO_SIZES]


def capability_config(race: str, n_units: int = 5, n_enemies: int = 5) -> dict:
    return {"n_units": n_units, "n_enemies": n_enemies, "team_gen": SMACV2_TEAMS[race],
            "start_positions": SMACV2_START_POSITIONS}


def epymarl_scenario_env_args(race: str, n_units: int, n_enemies: int) -> dict:
    """EPyMARL's smacv2_configs/<race>_<n>_vs_<m>.yaml env_args: SMACv2's example values without
    prob_obs_enemy and action_mask, with the scenario's sizes."""
    return {**SMACV2_EXAMPLE_ENV_ARGS, "map_name": f"10gen_{race}",
            "capability_config": capability_config(race, n_units, n_enemies)}


def test_the_game_logic_takes_smacv2s_arguments():
    """Every argument of SMACv2's env, with its default, is a declared env_args key of sc2wrapped and
    sc2v2 (main.py checks overrides against these), and only marlkit's besides."""
    factory = main.env_factory("sc2v2")
    assert main.env_factory("sc2wrapped") is factory
    parameters = inspect.signature(factory).parameters
    assert set(parameters) == set(SMACV2_ENV_DEFAULTS) | set(MARLKIT_ENV_ARGS)
    for name, default in SMACV2_ENV_DEFAULTS.items():
        if name not in MARLKIT_DEFAULTS:
            assert parameters[name].default == default, name


@pytest.mark.parametrize("race", sorted(SMACV2_TEAMS))
@pytest.mark.parametrize("variant", sorted(SMACV2_OBSERVABILITY))
def test_sc2_gen_configs_hold_smacv2s_values(race, variant):
    name = f"sc2_gen_{race}{variant}"
    raw = main.load_yaml(os.path.join(main.CONFIG_DIR, "envs", f"{name}.yaml"))
    assert {key: raw[key] for key in SMACV2_RUN} == SMACV2_RUN and raw["env"] == "sc2wrapped"
    config = build_config(["--config=qmix", f"--env-config={name}"])
    assert config["env"] == "sc2wrapped"
    assert config["env_args"] == {**SMACV2_EXAMPLE_ENV_ARGS, **SMACV2_OBSERVABILITY[variant], **MARLKIT_ADDED,
                                  "map_name": f"10gen_{race}", "capability_config": capability_config(race)}
    assert set(config["env_args"]) <= set(SMACV2_ENV_DEFAULTS) | set(MARLKIT_ENV_ARGS)
    smac_settings(config)  # the config hook's check passes


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_sc2v2_scenarios_hold_epymarls_values(scenario):
    race, size = scenario.split("_", 1)
    n_units, n_enemies = SCENARIO_SIZES[size]
    raw = main.load_yaml(os.path.join(main.CONFIG_DIR, "envs", "smacv2_configs", f"{scenario}.yaml"))
    expected = epymarl_scenario_env_args(race, n_units, n_enemies)
    del expected["map_name"]  # ours stays the scenario's name; EPyMARL's file names the 10gen map it plays
    assert raw == {"env_args": expected}
    config = build_config(["--config=qmix", "--env-config=sc2v2", "with", f"env_args.map_name={scenario}"])
    assert config["env_args"]["capability_config"] == capability_config(race, n_units, n_enemies)
    assert config["env_args"]["prob_obs_enemy"] == 1.0 and config["env_args"]["action_mask"] is True
    config["env_args"]["map_name"] = scenario
    smac_settings(config)


def test_sc2v2_yaml_holds_epymarls_values():
    raw = main.load_yaml(os.path.join(main.CONFIG_DIR, "envs", "sc2v2.yaml"))
    assert {key: raw[key] for key in EPYMARL_SC2V2} == EPYMARL_SC2V2
    assert raw["env_args"]["map_name"] is None
    assert set(os.listdir(os.path.join(main.CONFIG_DIR, "envs", "smacv2_configs"))) == {f"{s}.yaml" for s in SCENARIOS}


def test_scenario_layer_sits_between_sc2v2_yaml_and_the_algorithm_and_command_line(monkeypatch):
    # coma.yaml sets env_args.state_last_action: False, over the scenario's True.
    config = build_config(["--config=coma", "--env-config=sc2v2", "with", "env_args.map_name=terran_20_vs_23"])
    assert config["env_args"]["state_last_action"] is False
    assert config["env_args"]["backend"] == "auto"  # from sc2v2.yaml
    monkeypatch.setattr(main, "COMMAND_LINE_KEYS", set())
    monkeypatch.setattr(main.ex, "observers", [])
    argv = ["main.py", "--config=qmix", "--env-config=sc2v2", "print_config", "with", "env_args.map_name=zerg_10_vs_11",
            "env_args.step_mul=4", "env_args.capability_config.start_positions.p=1",
            "env_args.capability_config.enemy_mask.dist_type=mask",
            "env_args.capability_config.enemy_mask.mask_probability=0.25"]
    assert main.main(argv) == 0
    env_args = main.ex.current_run.config["env_args"]
    assert env_args["map_name"] == "zerg_10_vs_11" and env_args["step_mul"] == 4
    capabilities = env_args["capability_config"]
    assert (capabilities["n_units"], capabilities["n_enemies"]) == (10, 11)
    assert capabilities["start_positions"]["p"] == 1.0 and capabilities["team_gen"] == SMACV2_TEAMS["zerg"]
    assert capabilities["enemy_mask"] == {"dist_type": "mask", "mask_probability": 0.25}


@pytest.mark.parametrize("argv, message", [
    ([], "no env_args.map_name: env sc2v2 plays one of SMACv2's scenarios: protoss_5_vs_5, "),
    (["with", "env_args.map_name=zerg_10_vs_12"], "env_args.map_name='zerg_10_vs_12': env sc2v2 plays one of "
                                                  "SMACv2's scenarios: " + ", ".join(SCENARIOS)),
])
def test_sc2v2_needs_a_scenario_name(argv, message):
    with pytest.raises(UsageError) as error:
        build_config(["--config=qmix", "--env-config=sc2v2", *argv])
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("env_config, token, message", [
    ("sc2_gen_zerg", "env_args.capability_config.n_unit=5",
     "unknown config key 'env_args.capability_config.n_unit' (with env_args.capability_config.n_unit=5); "
     "did you mean 'env_args.capability_config.n_units'?"),
    ("sc2_gen_zerg", "env_args.capability_config.team_gen.weigths=[1,0,0]",
     "did you mean 'env_args.capability_config.team_gen.weights'?"),
    ("sc2_gen_zerg", "env_args.capability_config.enemy_mask.mask_prob=0.5",
     "did you mean 'env_args.capability_config.enemy_mask.mask_probability'?"),
    ("sc2_gen_zerg", "env_args.capability_config.n_units=5.5", "must be a whole number"),
    ("sc2", "env_args.capability_config.n_units=5",
     "unknown config key 'env_args.capability_config' (with env_args.capability_config={'n_units': 5}): "
     "a SMACv2 setting: play SMACv2 with --env-config=sc2_gen_<race> (env sc2wrapped) or --env-config=sc2v2"),
    ("sc2", "env_args.conic_fov=True", "a SMACv2 setting"),
])
def test_bad_nested_overrides_give_one_line(env_config, token, message):
    config = build_config(["--config=qmix", f"--env-config={env_config}"])
    with pytest.raises(UsageError) as error:
        checked_params(["main.py", "with", token], config)
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("token", ["env_args.capability_config.n_units=8",
                                   "env_args.capability_config.team_gen.weights=[0.5,0.5,0]"])
def test_nested_overrides_pass(token):
    config = build_config(["--config=qmix", "--env-config=sc2_gen_protoss"])
    assert checked_params(["main.py", "with", token], config)[2:] == [token]


@pytest.mark.parametrize("env_config, env_args, message", [
    ("sc2_gen_protoss", {"map_name": "3m"}, "'3m' is not a SMACv2 map"),
    ("sc2_gen_protoss", {"map_name": "10gen_zerg"}, "'stalker' is not a zerg unit"),
    ("sc2_gen_protoss", {"map_name": "protoss_10_vs_11"}, "capability_config.n_units=5 does not match the scenario"),
    ("sc2_gen_terran", {"capability_config": {"team_gen": {"weights": [0.5, 0.5]}}}, "capability_config.team_gen.weights"),
    ("sc2_gen_terran", {"capability_config": {"start_positions": {"map_x": 48}}},
     "capability_config.start_positions.map_x=48 must be 32"),
    ("sc2", {"map_name": "protoss_5_vs_5"}, "'protoss_5_vs_5' is a SMACv2 map"),
])
def test_bad_smacv2_settings_are_refused_by_the_config_check(monkeypatch, tmp_path, env_config, env_args, message):
    monkeypatch.setenv("SC2PATH", str(tmp_path / "no_game_here"))
    config = build_config(["--config=qmix", f"--env-config={env_config}"])
    main.recursive_dict_update(config, {"env_args": env_args})
    with pytest.raises(InputError, match=message):
        smac_settings(config)


def test_bad_capability_config_fails_before_any_worker_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("SC2PATH", str(tmp_path / "no_game_here"))
    proc = run_main("--config=qmix", "--env-config=sc2_gen_zerg", "with", f"local_results_path={tmp_path}",
                    "env_args.capability_config.team_gen.unit_types=['zergling','roach','hydralisk']")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "unknown unit type 'roach' in capability_config.team_gen.unit_types" in proc.stderr.strip().splitlines()[-1]
    assert not any(tmp_path.glob("sacred/*/*/1/config.json"))
