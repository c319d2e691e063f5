"""Helpers shared by the sweep and plot tools: dotted config keys (`env_args.map_name`) and the
unique_token of a run (`<name>__<date>`; on SMAC `<name>_<engine>__<date>`; with `_bfloat16` before
the date when it trained in bfloat16; see run.run_label)."""
import re
from typing import Any

TOKEN_DATE_FORMAT = "%Y-%m-%d_%H-%M-%S"


def get_dotted(config: dict, dotted: str) -> Any:
    """config['a']['b'] for 'a.b'; KeyError(dotted) when a key is missing."""
    value = config
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(dotted)
        value = value[part]
    return value


def has_dotted(config: dict, dotted: str) -> bool:
    try:
        get_dotted(config, dotted)
    except KeyError:
        return False
    return True


def flatten(config: dict, prefix: str = "") -> dict:
    """{'a.b': value} for nested {'a': {'b': value}} (an empty dict stays a value)."""
    flat = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def nested(dotted: str, value: Any) -> dict:
    """{'a': {'b': value}} for 'a.b'."""
    for part in reversed(dotted.split(".")):
        value = {part: value}
    return value


def token_pattern(name: str) -> re.Pattern:
    """Matches the unique_tokens of runs named `name`; group "date" is the token's time stamp. The tags
    are spelled out, so `x_seed1` never matches the tokens of `x_seed10`."""
    return re.compile(re.escape(name) + r"(_builtin|_sc2)?(_bfloat16)?__(?P<date>\d{4}-\d{2}-\d{2}_\d{2}-\d{2}-\d{2})$")
