"""PyMARL2's configs and keys: every option the code reads is a declared key with PyMARL2's default, and
the algorithm presets hold PyMARL2's values."""
import ast
import os

import pytest

import main
from main import build_config

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
# Packages whose `args` is the run's config (the tools' `args` are their argparse options).
CONFIG_READERS = ("components", "controllers", "learners", "modules", "runners", "run", "envs", "utils")
# Set by run.py from the env, or derived by it, not configured.
RUNTIME_KEYS = {"n_agents", "n_actions", "state_shape", "obs_shape", "episode_limit", "device", "unique_token",
                "env_seed_generation", "seed"}  # seed: sacred's, set by main.py when not given


def config_reads() -> dict:
    """{key: [fallback default or None]} of every `args.key` and `getattr(args, "key", default)` in the
    config readers (`args`, `self.args`)."""
    reads = {}
    for package in CONFIG_READERS:
        for folder, _, files in os.walk(os.path.join(SRC, package)):
            for name in files:
                if name.endswith(".py"):
                    with open(os.path.join(folder, name)) as f:
                        source = f.read()
                    if "argparse" not in source:  # a command-line tool's `args` are its options
                        collect_reads(ast.parse(source), reads)
    return reads


def is_args(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "args") or (
        isinstance(node, ast.Attribute) and node.attr == "args" and isinstance(node.value, ast.Name))


def collect_reads(tree: ast.AST, reads: dict) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_args(node.value) and isinstance(node.ctx, ast.Load):
            reads.setdefault(node.attr, [])
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
              and len(node.args) == 3 and is_args(node.args[0]) and isinstance(node.args[1], ast.Constant)):
            fallback = node.args[2]
            reads.setdefault(node.args[1].value, []).append(
                fallback.value if isinstance(fallback, ast.Constant) else None)


def test_every_option_the_code_reads_is_a_declared_key_with_its_fallback_as_default():
    defaults = main.load_yaml(os.path.join(main.CONFIG_DIR, "default.yaml"))
    reads = config_reads()
    assert {"td_lambda", "weight_decay", "test_noise", "double_q", "use_per", "qmix_pos_func"} <= set(reads)
    undeclared = sorted(set(reads) - set(defaults) - RUNTIME_KEYS - {"name"})
    assert undeclared == []
    for key, fallbacks in reads.items():
        for fallback in fallbacks:
            if fallback is not None and key in defaults:
                assert defaults[key] == fallback, key


@pytest.mark.parametrize("key", ["weight_decay", "qmix_pos_func", "test_noise", "double_q", "use_per", "per_alpha",
                                 "per_beta", "return_priority", "mask_before_softmax", "tune_learner_threads"])
def test_pymarl2_keys_can_be_set(key, tmp_path):
    config = build_config(["--config=qmix", "--env-config=sc2"])
    assert main.checked_params(["main.py", "with", f"{key}={config[key]!r}"], config)[2:] == [f"{key}={config[key]!r}"]


# What PyMARL2's riit.yaml and riit_online.yaml share.
RIIT = {"learner": "fmac_learner", "mac": "lica_mac", "agent": "rnn", "agent_output_type": "pi_logits",
        "action_selector": "gumbel", "epsilon_start": 0.0, "epsilon_finish": 0.0, "epsilon_anneal_time": 100000,
        "mask_before_softmax": True, "runner": "parallel", "batch_size_run": 8, "buffer_size": 128, "batch_size": 32,
        "t_max": 10050000, "mixer": "qmix", "mixing_embed_dim": 32, "hypernet_embed": 64, "critic_hidden_dim": 128,
        "lr": 0.001, "critic_lr": 0.001, "lambd": 0.6, "entropy_coef": 0.03, "optimizer": "adam"}

# PyMARL2's values of its YAML files (hijkzzz/pymarl2, src/config/algs/), merged over its default.yaml.
PYMARL2_PRESETS = {
    "iql": {"learner": "q_learner", "double_q": True, "mixer": None, "mac": "basic_mac", "agent": "rnn",
            "agent_output_type": "q", "optimizer": "adam", "lr": 0.0005, "batch_size": 32, "buffer_size": 5000,
            "batch_size_run": 8, "runner": "parallel", "target_update_interval": 200, "epsilon_start": 1.0,
            "epsilon_finish": 0.05, "epsilon_anneal_time": 100000, "t_max": 10050000, "name": "iql_env=8_adam"},
    "qmix": {"learner": "nq_learner", "mixer": "qmix", "mac": "n_mac", "agent": "n_rnn", "rnn_hidden_dim": 64,
             "mixing_embed_dim": 32, "hypernet_embed": 64, "lr": 0.001, "td_lambda": 0.6, "q_lambda": False,
             "batch_size": 128, "buffer_size": 5000, "batch_size_run": 8, "use_per": False, "per_alpha": 0.6,
             "per_beta": 0.4, "return_priority": False, "t_max": 10050000, "name": "qmix_env=8_adam_td_lambda"},
    "qmix_large": {"learner": "nq_learner", "mixer": "qmix", "mac": "n_mac", "agent": "n_rnn",
                   "rnn_hidden_dim": 256, "mixing_embed_dim": 64, "hypernet_embed": 256, "lr": 0.001,
                   "td_lambda": 0.6, "weight_decay": 0, "batch_size": 128, "buffer_size": 5000, "batch_size_run": 8,
                   "use_per": False, "t_max": 10050000, "name": "qmix_large_env=8_adam_td_lambda"},
    "qmix_high_sample_efficiency": {"learner": "nq_learner", "mixer": "qmix", "mac": "n_mac", "agent": "n_rnn",
                                    "rnn_hidden_dim": 64, "mixing_embed_dim": 32, "hypernet_embed": 64, "lr": 0.001,
                                    "td_lambda": 0.5, "batch_size": 64, "buffer_size": 2500, "batch_size_run": 4,
                                    "t_max": 10050000, "name": "qmix_env=4_adam_td_lambda"},
    "qmix_predator_prey": {"learner": "nq_learner", "mixer": "qmix", "mac": "n_mac", "agent": "n_rnn",
                           "mixing_embed_dim": 32, "hypernet_embed": 64, "lr": 0.001, "td_lambda": 0.5,
                           "batch_size": 128, "buffer_size": 1000, "batch_size_run": 8, "t_max": 1050000,
                           "target_update_interval": 200, "name": "qmix_env=8_adam_td_lambda"},
    "qatten": {"learner": "nq_learner", "mixer": "qatten", "mac": "n_mac", "agent": "n_rnn", "optimizer": "adam",
               "lr": 0.001, "td_lambda": 0.6, "n_query_embedding_layer1": 64, "n_query_embedding_layer2": 32,
               "n_key_embedding_layer1": 32, "n_head_embedding_layer1": 64, "n_head_embedding_layer2": 4,
               "n_attention_head": 4, "n_constrant_value": 32, "type": "weighted", "agent_own_state_size": True,
               "batch_size": 128, "buffer_size": 5000, "batch_size_run": 8, "t_max": 10050000,
               "name": "qatten_env=8_adam_td_lambda"},
    "qplex": {"learner": "dmaq_qatten_learner", "mixer": "dmaq", "mac": "basic_mac", "agent": "rnn",
              "double_q": True, "mixing_embed_dim": 32, "hypernet_embed": 64, "adv_hypernet_layers": 2,
              "adv_hypernet_embed": 64, "td_lambda": 0.6, "lr": 0.001, "num_kernel": 4, "is_minus_one": True,
              "weighted_head": True, "is_adv_attention": True, "is_stop_gradient": True, "batch_size": 128,
              "t_max": 10050000, "name": "qplex_env=8_adam_td_lambda"},
    **{f"{kind}_qmix": {"learner": "max_q_learner", "mixer": "qmix", "mac": "basic_mac", "agent": "rnn",
                        "double_q": True, "mixing_embed_dim": 32, "hypernet_layers": 2, "hypernet_embed": 64,
                        "central_loss": 1, "qmix_loss": 1, "w": 0.1, "hysteretic_qmix": kind == "ow",
                        "central_mixing_embed_dim": 256, "central_action_embed": 1, "central_mac": "basic_central_mac",
                        "central_agent": "central_rnn", "central_rnn_hidden_dim": 64, "central_mixer": "ff",
                        "td_lambda": 0.6, "lr": 0.001, "t_max": 10050000, "name": f"{kind}_qmix_env=8_adam_td_lambda"}
       for kind in ("ow", "cw")},
    "qtran": {"learner": "qtran_learner", "mixer": "qtran_base", "mac": "basic_mac", "agent": "rnn",
              "optimizer": "adam", "double_q": True, "mixing_embed_dim": 64, "qtran_arch": "qtran_paper",
              "opt_loss": 1, "nopt_min_loss": 0.1, "network_size": "small", "batch_size": 128, "buffer_size": 5000,
              "lr": 0.0005, "name": "qtran_env=8_adam"},
    "qmix_att": {"learner": "nq_learner", "mixer": "qmix", "mac": "n_mac", "agent": "att_rnn", "att_heads": 4,
                 "att_embed_dim": 32, "mixing_embed_dim": 32, "hypernet_embed": 64, "lr": 0.001, "td_lambda": 0.3,
                 "optimizer": "adam", "grad_norm_clip": 20.0, "t_max": 10050000,
                 "name": "qmix_att_env=8_adam_td_lambda"},
    "qmix_conv": {"learner": "nq_learner", "mixer": "qmix", "mac": "conv_mac", "agent": "conv_agent",
                  "rnn_hidden_dim": 128, "mixing_embed_dim": 32, "hypernet_embed": 64, "lr": 0.001, "td_lambda": 0.6,
                  "optimizer": "adam", "frames": 4, "t_max": 10050000, "name": "qmix_conv_env=8_adam_td_lambda"},
    "coma": {"learner": "coma_learner", "mac": "basic_mac", "agent": "rnn", "agent_output_type": "pi_logits",
             "action_selector": "multinomial", "epsilon_start": 0.5, "epsilon_finish": 0.01,
             "epsilon_anneal_time": 100000, "mask_before_softmax": True, "runner": "parallel", "buffer_size": 5000,
             "batch_size_run": 8, "batch_size": 128, "target_update_interval": 200, "lr": 0.0005,
             "critic_lr": 0.0005, "td_lambda": 0.6, "entropy": 0.09, "critic_q_fn": "coma",
             "critic_baseline_fn": "coma", "critic_train_mode": "seq", "critic_train_reps": 1, "q_nstep": 0,
             "name": "coma_env=8_adam_td_lambda"},
    "ippo": {"learner": "ppo_learner", "mac": "basic_mac", "agent": "n_rnn", "agent_output_type": "pi_logits",
             "action_selector": "multinomial", "epsilon_start": 0.0, "epsilon_finish": 0.0,
             "epsilon_anneal_time": 100000, "mask_before_softmax": True, "runner": "parallel", "buffer_size": 64,
             "batch_size_run": 8, "batch_size": 64, "accumulated_episodes": 8, "t_max": 10050000,
             "obs_agent_id": True, "lr": 0.0005, "critic_coef": 0.5, "entropy": 0.01, "gae_lambda": 0.95,
             "mini_epochs": 8, "eps_clip": 0.2, "save_probs": True, "use_layer_norm": True, "use_orthogonal": True,
             "gain": 0.01, "use_value_norm": True, "name": "ippo_env=8_adam_gae"},
    "vmix": {"learner": "policy_gradient_v2", "mac": "ppo_mac", "agent": "rnn_ppo", "agent_output_type": "pi_logits",
             "action_selector": "multinomial", "epsilon_start": 0.5, "epsilon_finish": 0.0,
             "epsilon_anneal_time": 100000, "mask_before_softmax": True, "runner": "parallel", "buffer_size": 8,
             "batch_size_run": 8, "batch_size": 8, "t_max": 10050000, "target_update_interval": 200, "lr": 0.001,
             "critic_lr": 0.001, "td_lambda": 0.8, "mixer": "qmix", "q_nstep": 0, "lam": 0.95, "ent_coef": 0.01,
             "vf_coef": 0.1, "mixing_embed_dim": 32, "hypernet_layers": 2, "hypernet_embed": 64, "abs": True,
             "optim": "rmsprop", "name": "vmix_env=8_adam_td_lambda"},
    "lica": {"learner": "lica_learner", "mac": "lica_mac", "agent": "rnn", "agent_output_type": "pi_logits",
             "action_selector": "gumbel", "epsilon_start": 0.0, "epsilon_finish": 0.0, "epsilon_anneal_time": 100000,
             "mask_before_softmax": True, "runner": "parallel", "buffer_size": 128, "batch_size_run": 8,
             "batch_size": 32, "t_max": 10050000, "td_lambda": 0.6, "target_update_interval": 200,
             "lica_mixing_embed_dim": 64, "hypernet_layers": 2, "hypernet_embed_dim": 64, "critics_update_num": 1,
             "entropy_coef": 0.06, "lr": 0.0025, "critic_lr": 0.0005, "critic": "lica",
             "name": "lica_env=8_adam_td_lambda"},
    "dop": {"learner": "offpg_learner", "mac": "dop_mac", "agent": "rnn", "agent_output_type": "pi_logits",
            "action_selector": "multinomial", "epsilon_start": 0.5, "epsilon_finish": 0.05,
            "epsilon_anneal_time": 500000, "mask_before_softmax": False, "runner": "parallel", "buffer_size": 64,
            "off_buffer_size": 5000, "batch_size_run": 8, "batch_size": 32, "off_batch_size": 64, "t_max": 10050000,
            "target_update_interval": 600, "step": 5, "ent_coef": 0, "lr": 0.0005, "critic_lr": 0.0001,
            "td_lambda": 0.8, "tb_lambda": 0.93, "mixing_embed_dim": 32, "critic_q_fn": "coma",
            "critic_baseline_fn": "coma", "critic_train_mode": "seq", "critic_train_reps": 1, "q_nstep": 0,
            "grad_norm_clip": 20, "name": "dop_env=8_rmsprop_tb+td_lambda", "run": "dop_run"},
    "riit": {**RIIT, "off_buffer_size": 5000, "off_batch_size": 64, "run": "on_off", "target_update_interval": 200,
             "abs": True, "name": "riit_env=8_adam_td_lambda"},
    "riit_online": {**RIIT, "target_update_interval": 1, "run": "default", "name": "riit_online_env=8_adam_td_lambda"},
    "vdn": {"learner": "nq_learner", "mixer": "vdn", "mac": "n_mac", "agent": "n_rnn", "lr": 0.001,
            "td_lambda": 0.6, "batch_size": 128, "buffer_size": 5000, "batch_size_run": 8,
            "name": "vdn_env=8_adam_td_lambda"},
}


@pytest.mark.parametrize("alg", sorted(PYMARL2_PRESETS))
def test_presets_hold_pymarl2_values(alg):
    config = build_config([f"--config={alg}", "--env-config=sc2"])
    assert {key: config[key] for key in PYMARL2_PRESETS[alg]} == PYMARL2_PRESETS[alg]
    assert config["train_precision"] == "float32" and not config["tune_learner_threads"]


@pytest.mark.parametrize("alg, anneal", [("qmix_increase_eps_time", 500000), ("qmix_decrease_eps_time", 50000)])
def test_epsilon_presets_differ_from_qmix_only_in_the_anneal_their_header_names(alg, anneal):
    preset, qmix = (build_config([f"--config={name}", "--env-config=sc2"]) for name in (alg, "qmix"))
    differ = {key for key in preset.keys() | qmix.keys() if preset.get(key) != qmix.get(key)}
    assert differ == {"epsilon_anneal_time", "name"} and preset["epsilon_anneal_time"] == anneal
    with open(os.path.join(main.CONFIG_DIR, "algs", f"{alg}.yaml")) as f:
        header = f.read().split("---", 2)[1]
    assert f"{anneal // 1000}k env steps" in header and "nothing else differs" in header


def test_stag_hunt_env_config_holds_pymarl2_values():
    config = build_config(["--config=qmix_predator_prey", "--env-config=stag_hunt"])
    assert (config["env"], config["obs_agent_id"], config["test_nepisode"], config["test_interval"]) == \
        ("stag_hunt", False, 16, 10000)
    env_args = config["env_args"]
    assert {key: env_args[key] for key in ("n_agents", "n_stags", "n_hare", "world_shape", "agent_obs",
                                           "capture_action", "capture_action_conditions", "episode_limit",
                                           "reward_stag", "reward_time", "miscapture_punishment")} == {
        "n_agents": 8, "n_stags": 8, "n_hare": 0, "world_shape": [10, 10], "agent_obs": [2, 2],
        "capture_action": True, "capture_action_conditions": [2, 1], "episode_limit": 200, "reward_stag": 10,
        "reward_time": 0, "miscapture_punishment": 0}
