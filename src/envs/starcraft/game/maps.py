"""SMAC's map registry: the 23 scenarios' sizes, races, time limits and unit-type encoding;
SMACv2's three generated maps and the 15 scenarios of its paper.

Values are SMAC's (`smac/env/starcraft2/maps/smac_maps.py`); the game logic derives the action,
observation and state sizes from them, the engine builds the armies of the map of that name.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class MapParams:
    """One scenario: army sizes, episode limit (env steps), races ("T"/"P"/"Z"), type bits, kind."""

    n_agents: int
    n_enemies: int
    limit: int
    a_race: str
    b_race: str
    unit_type_bits: int
    map_type: str


MAP_REGISTRY: dict[str, MapParams] = {
    "3m": MapParams(3, 3, 60, "T", "T", 0, "marines"),
    "8m": MapParams(8, 8, 120, "T", "T", 0, "marines"),
    "25m": MapParams(25, 25, 150, "T", "T", 0, "marines"),
    "5m_vs_6m": MapParams(5, 6, 70, "T", "T", 0, "marines"),
    "8m_vs_9m": MapParams(8, 9, 120, "T", "T", 0, "marines"),
    "10m_vs_11m": MapParams(10, 11, 150, "T", "T", 0, "marines"),
    "27m_vs_30m": MapParams(27, 30, 180, "T", "T", 0, "marines"),
    "MMM": MapParams(10, 10, 150, "T", "T", 3, "MMM"),
    "MMM2": MapParams(10, 12, 180, "T", "T", 3, "MMM"),
    "2s3z": MapParams(5, 5, 120, "P", "P", 2, "stalkers_and_zealots"),
    "3s5z": MapParams(8, 8, 150, "P", "P", 2, "stalkers_and_zealots"),
    "3s5z_vs_3s6z": MapParams(8, 9, 170, "P", "P", 2, "stalkers_and_zealots"),
    "3s_vs_3z": MapParams(3, 3, 150, "P", "P", 0, "stalkers"),
    "3s_vs_4z": MapParams(3, 4, 200, "P", "P", 0, "stalkers"),
    "3s_vs_5z": MapParams(3, 5, 250, "P", "P", 0, "stalkers"),
    "1c3s5z": MapParams(9, 9, 180, "P", "P", 3, "colossi_stalkers_zealots"),
    "2m_vs_1z": MapParams(2, 1, 150, "T", "P", 0, "marines"),
    "corridor": MapParams(6, 24, 400, "P", "Z", 0, "zealots"),
    "6h_vs_8z": MapParams(6, 8, 150, "Z", "P", 0, "hydralisks"),
    "2s_vs_1sc": MapParams(2, 1, 300, "P", "Z", 0, "stalkers"),
    "so_many_baneling": MapParams(7, 32, 100, "P", "Z", 0, "zealots"),
    "bane_vs_bane": MapParams(24, 24, 200, "Z", "Z", 2, "bane"),
    "2c_vs_64zg": MapParams(2, 64, 400, "P", "Z", 0, "colossus"),
}

# SMACv2's procedurally generated maps (oxwhirl/smacv2 smac_maps.py), kept apart from SMAC's so
# that neither env takes the other's maps: the army sizes are defaults that capability_config's
# n_units / n_enemies replace; all three are played on SMACv2's empty 32x32 map (32x32_flat.SC2Map).
GEN_MAP_REGISTRY: dict[str, MapParams] = {
    "10gen_protoss": MapParams(10, 10, 200, "P", "P", 3, "protoss_gen"),
    "10gen_terran": MapParams(10, 10, 200, "T", "T", 3, "terran_gen"),
    "10gen_zerg": MapParams(10, 10, 200, "Z", "Z", 3, "zerg_gen"),
}
GEN_MAPS = tuple(GEN_MAP_REGISTRY)
# The 15 scenarios of the SMACv2 paper, as EPyMARL names them (`--env-config=sc2v2 with
# env_args.map_name=...`): race and army sizes; each plays its race's 10gen map.
SMACV2_SCENARIOS: dict[str, tuple[str, int, int]] = {
    f"{race}_{n_units}_vs_{n_enemies}": (f"10gen_{race}", n_units, n_enemies)
    for race in ("protoss", "terran", "zerg")
    for n_units, n_enemies in ((5, 5), (10, 10), (20, 20), (10, 11), (20, 23))
}


def get_gen_map_params(map_name: str) -> MapParams:
    """The 10gen map's entry for a 10gen map or SMACv2 scenario name (see gen_map_of)."""
    return GEN_MAP_REGISTRY[gen_map_of(map_name)]


def gen_map_of(map_name: str) -> str:
    """The 10gen map that plays `map_name` (a 10gen map or a SMACv2 scenario name); ValueError for
    any other name, listing the accepted ones."""
    if map_name in GEN_MAPS:
        return map_name
    if map_name in SMACV2_SCENARIOS:
        return SMACV2_SCENARIOS[map_name][0]
    raise ValueError(f"'{map_name}' is not a SMACv2 map; SMACv2 plays {', '.join(GEN_MAPS)} "
                     f"or a scenario: {', '.join(SMACV2_SCENARIOS)}")


def get_map_params(map_name: str) -> MapParams:
    """The registry entry of `map_name`; an unknown name fails listing every known map."""
    if map_name not in MAP_REGISTRY:
        if is_gen_map(map_name):
            raise ValueError(f"'{map_name}' is a SMACv2 map: play it with --env-config=sc2v2 (a scenario name) or "
                             f"--env-config=sc2_gen_<race> (env sc2wrapped), not with SMAC's env")
        raise ValueError(f"unknown map '{map_name}'; known maps: {', '.join(MAP_REGISTRY)}")
    return MAP_REGISTRY[map_name]


def is_gen_map(map_name: str) -> bool:
    """True for SMACv2's 10gen maps and scenario names, which the game plays from a drawn Team."""
    return map_name in GEN_MAPS or map_name in SMACV2_SCENARIOS
