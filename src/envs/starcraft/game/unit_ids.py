"""Raw unit-type ids shared by the game logic (starcraft2.py) and the engines.

Enemy units are StarCraft II's stock units and keep the game's own ids. Allied units are the
maps' custom "RL" copies, whose ids SC2 assigns per version; SMAC only uses their offsets from
the smallest allied id on a map. The built-in engine numbers them so that every map's offsets
come out as in the real map files: (Colossus_RL, Stalker_RL, Zealot_RL), (Marauder_RL,
Marine_RL, Medivac_RL) and (Baneling_RL, Zergling_RL) are consecutive in that order.

SMACv2's map defines all nine RL copies at once; their ids follow the map's unit data order
(envs.starcraft.game.teams.GEN_UNIT_NAMES), from GEN_RL_BASE on the built-in simulator.
"""

MARINE = 48
MARAUDER = 51
MEDIVAC = 54
ZEALOT = 73
STALKER = 74
COLOSSUS = 4
ZERGLING = 105
BANELING = 9
HYDRALISK = 107
SPINE_CRAWLER = 98

COLOSSUS_RL = 1970
STALKER_RL = 1971
ZEALOT_RL = 1972
MARAUDER_RL = 1973
MARINE_RL = 1974
MEDIVAC_RL = 1975
BANELING_RL = 1976
ZERGLING_RL = 1977
HYDRALISK_RL = 1978

GEN_RL_BASE = 1979  # after the SMAC maps' RL ids above, so that every raw id names one unit

# SMACv2's enemies are the stock units, by the names its configs use.
STOCK_ID_OF_NAME = {"baneling": BANELING, "colossus": COLOSSUS, "hydralisk": HYDRALISK, "marauder": MARAUDER,
                    "marine": MARINE, "medivac": MEDIVAC, "stalker": STALKER, "zealot": ZEALOT,
                    "zergling": ZERGLING}
