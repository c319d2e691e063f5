"""Checks of the command line's `with KEY=VALUE` overrides, before sacred sees them.

Sacred accepts any key and any value: a mistyped key silently adds a setting nobody reads, and a
value of the wrong kind fails much later, or never. Here every override must name a declared key
(a key of the merged YAML configs, or an argument of the env's constructor under `env_args.`) and
must have the key's kind. The kind is the YAML value's (or, for env_args, the constructor's type
hint), read the way PyMARL2 users write their commands:

- integer keys take integral floats, so `t_max=2e6` and `epsilon_anneal_time=5e5` work (`2.5` does not);
- float keys take integers (`lr=1`);
- string keys take numbers as the text typed (`env_args.difficulty=3` is "3", `game_version=4.10` is
  "4.10", not the float 4.1);
- keys whose default is null take anything.

An override that needs converting is rewritten as a token that sacred parses to the converted value,
so config.json records what the run used.
"""
import collections.abc
import difflib
import fnmatch
import inspect
import types
import typing
from typing import Any, Callable

from sacred.arg_parser import get_config_updates

# Keys PyMARL2's configs or code have that marlkit does not port, with the reason given to whoever
# types them after `with`.
_NOT_YET_PORTED = {
    "mlp agent": ("agent_return_logits",),
}
UNPORTED_KEYS = {
    key: f"a setting of PyMARL2's {algorithms}, which marlkit does not ship yet"
    for algorithms, keys in _NOT_YET_PORTED.items() for key in keys
}
# Arguments of SMACv2's env that SMAC's does not take, with the reason given to whoever sets one on
# another env.
SMACV2_ENV_ARGS = {
    key: "a SMACv2 setting: play SMACv2 with --env-config=sc2_gen_<race> (env sc2wrapped) or --env-config=sc2v2"
    for key in ("capability_config", "conic_fov", "num_fov_actions", "use_unit_ranges", "min_attack_range",
                "obs_own_pos", "obs_starcraft", "kill_unit_step_mul", "fully_observable", "prob_obs_enemy",
                "action_mask")
}


# Kinds of keys whose default does not tell (null, absent from default.yaml, or more than one kind:
# the first that fits is taken).
_KEY_KINDS = {"seed": int, "name": str, "accumulated_episodes": int,
              "seeds": list, "seed_batch": dict,  # run/seed_batch.py
              "agent_own_state_size": (bool, int),  # True: from the env's state layout (Qatten), or a size
              "cg_edges": (int, list, str), "cg_utilities_hidden_dim": (int, list), "cg_payoffs_hidden_dim": (int, list),
              "cg_payoff_rank": int,  # PAC-DCG's graph: a name, a number of edges or the edges; widths
              "detach_every": int,  # trust_region_learner's truncated backpropagation (null: none)
              "lr_anneal_time": int}  # trust_region_learner's actor lr schedule (null: t_max)

# The meaningful range of numeric settings: key -> (lowest, highest); None = unbounded. Checked on the
# merged config (YAML files and command line) before the run starts.
RANGES = {
    **{key: (1, None) for key in (
        "t_max", "batch_size_run", "batch_size", "buffer_size", "test_nepisode", "test_interval", "log_interval",
        "runner_log_interval", "learner_log_interval", "save_model_interval", "target_update_interval",
        "env_worker_max_failures", "rnn_hidden_dim", "mixing_embed_dim", "hypernet_embed", "epsilon_anneal_time",
        "accumulated_episodes", "mini_epochs", "lica_mixing_embed_dim", "hypernet_embed_dim", "off_buffer_size",
        "off_batch_size", "step", "critic_hidden_dim", "mini_epochs_critic", "mini_epochs_actor", "detach_every",
        "lr_anneal_time")},
    **{key: (0.0, 1.0) for key in ("gamma", "td_lambda", "gae_lambda", "tb_lambda", "lambd", "epsilon_start",
                                   "epsilon_finish", "test_noise", "per_beta", "optim_alpha")},
    **{key: (0, None) for key in ("load_step", "learner_threads", "weight_decay", "per_alpha", "entropy", "critic_coef",
                                  "eps_clip", "ent_coef", "vf_coef", "entropy_coef")},
    "seed": (0, 2 ** 32 - 1),  # numpy's seed range
    "msg_iterations": (0, None), "cg_payoff_rank": (1, None),  # PAC-DCG (rank null: full rank)
}
# Settings that must be above 0 (and, for learning rates, at most 1: beyond that a step overshoots).
ABOVE_ZERO = {"lr": 1.0, "critic_lr": 1.0, "grad_norm_clip": None, "optim_eps": None, "env_worker_timeout": None,
              "qmix_pos_func_beta": None}


class UsageError(Exception):
    """A command line or config file mistake: reported as one line and exit code 2, without a traceback."""


def normalise_overrides(tokens: list, config: dict, env_kinds: dict | None, nested_keys: dict | None = None) -> list:
    """The `with` tokens checked against `config` (the merged YAML configs) and, where a value needs
    converting, rewritten. `env_kinds` maps the env's constructor arguments to their kinds
    (env_arg_kinds); None = any argument. `nested_keys` maps dotted paths (fnmatch patterns, e.g.
    "env_args.capability_config.*") of mappings inside env_args to the keys the env reads there
    beyond those the config has. Raises UsageError for a token that is not KEY=VALUE (marlkit has
    no sacred named configs), an unknown key or a value of the wrong kind."""
    for i, token in enumerate(tokens):
        if "=" not in token:
            following = tokens[i + 1] if i + 1 < len(tokens) and "=" not in tokens[i + 1] else "VALUE"
            raise UsageError(f"'{token}' after `with` is not KEY=VALUE (marlkit has no named configs); "
                             f"did you mean {token}={following}?")
    return [_normalise_token(token, config, env_kinds, nested_keys or {}) for token in tokens]


def normalise_file(layer: dict, base: dict, env_kinds: dict | None, path: str,
                   nested_keys: dict | None = None) -> dict:
    """A config file's keys and values checked against `base` (the files merged before it) as the
    command line is, and converted; UsageError naming `path` for an unknown key or a wrong kind."""
    if not isinstance(layer, collections.abc.Mapping):
        raise UsageError(f"{path} must map config keys to values, but holds a {type(layer).__name__}")
    return _check(layer, base, "", _Declared(env_kinds, nested_keys or {}), {}, source=path)[0]


def range_error(config: dict) -> str | None:
    """The first setting of `config` outside its meaningful range (RANGES, ABOVE_ZERO), as one line."""
    for key, (low, high) in RANGES.items():
        value = config.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and \
                ((low is not None and value < low) or (high is not None and value > high)):
            bounds = f"within [{low}, {high}]" if high is not None else f"at least {low}"
            return f"{key}={value} must be {bounds}"
    for key, high in ABOVE_ZERO.items():
        value = config.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and \
                not (0 < value and (high is None or value <= high)):
            return f"{key}={value} must be above 0" + (f" and at most {high}" if high is not None else "")
    return None


class _Declared(typing.NamedTuple):
    """What may be set beyond the config's keys: the env's arguments and their kinds (None = any
    argument), and the keys of mappings inside env_args by dotted path pattern."""

    env_kinds: dict | None
    nested_keys: dict

    def extra_keys(self, where: str) -> set:
        """Keys allowed at `where` ("" or a dotted path ending in ".") beyond the config's."""
        if not where:
            return set(_KEY_KINDS)
        if where == "env_args.":
            return set(self.env_kinds or ())
        return {key for pattern, keys in self.nested_keys.items() if fnmatch.fnmatchcase(where[:-1], pattern)
                for key in keys}

    def open_mapping(self, where: str) -> bool:
        """Whether the mapping at `where` has declared keys (so a new one is checked key by key)."""
        return any(fnmatch.fnmatchcase(where[:-1], pattern) for pattern in self.nested_keys)


def _normalise_token(token: str, config: dict, env_kinds: dict | None, nested_keys: dict) -> str:
    path, _, raw = token.partition("=")
    path = path.strip()
    updates, _ = get_config_updates([token])
    checked, changed = _check(updates, config, "", _Declared(env_kinds, nested_keys), {path: raw.strip()})
    if not changed:
        return token
    value = checked
    for part in path.split("."):
        value = value[part]
    return f"{path}={value!r}"


def _check(updates: dict, config: dict, where: str, declared: _Declared, typed: dict,
           source: str | None = None) -> tuple[dict, bool]:
    """(updates with converted values, whether any changed); UsageError for unknown keys and wrong
    kinds. `typed` maps a dotted key to the text typed for it; `source` names the config file the
    updates come from (None: the command line)."""
    in_env_args = where == "env_args."
    env_kinds = declared.env_kinds
    known = set(config) | declared.extra_keys(where)
    checked, changed = {}, False
    for key, value in updates.items():
        name = where + key
        if key not in known and not (in_env_args and env_kinds is None):
            raise UsageError(_unknown_key_message(name, value, known, where, source))
        default = config.get(key)
        if default is None and isinstance(value, collections.abc.Mapping) and declared.open_mapping(f"{name}."):
            default = {}
        if isinstance(value, collections.abc.Mapping) and isinstance(default, collections.abc.Mapping):
            checked[key], key_changed = _check(value, default, f"{name}.", declared, typed, source)
        else:
            kind = _KEY_KINDS.get(name) or (env_kinds.get(key) if in_env_args and env_kinds else None)
            try:
                checked[key] = convert(name, value, default, typed.get(name), kind)
            except UsageError as error:
                raise UsageError(f"{error} (in {source})" if source else str(error)) from None
            key_changed = type(checked[key]) is not type(value) or checked[key] != value
        changed = changed or key_changed
    return checked, changed


def _unknown_key_message(name: str, value: Any, known: set, where: str, source: str | None) -> str:
    key = name[len(where):]
    context = f"in {source}" if source else f"(with {name}={value!r})"
    if not where and key in UNPORTED_KEYS:
        return f"unknown config key '{name}' {context}: {UNPORTED_KEYS[key]}"
    if where == "env_args." and key in SMACV2_ENV_ARGS:
        return f"unknown config key '{name}' {context}: {SMACV2_ENV_ARGS[key]}"
    close = difflib.get_close_matches(key, sorted(known), n=1)
    if close:
        hint = f"did you mean '{where}{close[0]}'?"
    elif where not in ("", "env_args."):
        hint = f"{where[:-1]} takes {', '.join(sorted(known))}"
    else:
        hint = "the known keys are in src/config/ (default.yaml, envs/, algs/)"
    if source and not where:
        hint += " (new keys are declared in src/config/default.yaml)"
    return f"unknown config key '{name}' {context}; {hint}"


def convert(name: str, value: Any, default: Any, raw: str | None = None, kind: type | None = None) -> Any:
    """`value` as the kind of setting `name` is (`kind`, else the type of `default`; anything when
    both are missing; null where the default is null, and for string settings), or UsageError. `raw`
    is the text typed, kept as the value of a string setting given a number."""
    if isinstance(kind, tuple):
        return _convert_any(name, value, default, raw, kind)
    kind = kind or (None if default is None else type(default))
    if kind is None or (value is None and (default is None or kind is str)):
        return value
    if kind is bool or isinstance(value, bool):
        if kind is bool and isinstance(value, bool):
            return value
    elif isinstance(value, (int, float)):
        if kind is int:
            if float(value).is_integer():
                return int(value)
            raise UsageError(f"{name}={value!r} must be a whole number like the default {default!r} "
                             f"(2e6 is fine, 2.5 is not)")
        if kind is float:
            return float(value)
        if kind is str:
            return raw if raw is not None else str(value)
    elif isinstance(value, kind) or (kind in (list, tuple) and isinstance(value, (list, tuple))):
        return value
    hint = ""
    if kind is float and isinstance(value, str) and _is_number(value):
        hint = f"; YAML reads {value} (no decimal point) as text: write it with one, e.g. {float(value)!r}"
    raise UsageError(f"{name}={value!r} has the wrong type: expected {kind.__name__} like the default {default!r}, "
                     f"got {type(value).__name__}{hint}")


def _convert_any(name: str, value: Any, default: Any, raw: str | None, kinds: tuple) -> Any:
    """`value` as the first of `kinds` it converts to, or UsageError naming them all."""
    for kind in kinds:
        try:
            return convert(name, value, default, raw, kind)
        except UsageError:
            pass
    expected = " or ".join(kind.__name__ for kind in kinds)
    raise UsageError(f"{name}={value!r} has the wrong type: expected {expected}, got {type(value).__name__}")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def annotation_kind(annotation: Any) -> type | None:
    """The kind of value a type hint asks for (bool, int, float, str, list, tuple, dict), or None
    (anything) when it has none or allows several kinds; `X | None` is X."""
    if annotation is inspect.Parameter.empty:
        return None
    if isinstance(annotation, (types.UnionType,)) or typing.get_origin(annotation) is typing.Union:
        kinds = {annotation_kind(arg) for arg in typing.get_args(annotation) if arg is not type(None)}
        if kinds == {int, float}:
            return float
        return kinds.pop() if len(kinds) == 1 else None
    annotation = typing.get_origin(annotation) or annotation
    return annotation if annotation in (bool, int, float, str, list, tuple, dict) else None


def env_arg_kinds(factory: Callable | None) -> dict | None:
    """{argument: kind} of an env constructor's keyword arguments (annotation_kind); None when it
    takes any keyword (**kwargs) or is unknown."""
    if factory is None:
        return None
    parameters = inspect.signature(factory, eval_str=True).parameters.values()
    if any(parameter.kind is parameter.VAR_KEYWORD for parameter in parameters):
        return None
    return {parameter.name: annotation_kind(parameter.annotation) for parameter in parameters}
