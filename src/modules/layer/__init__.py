"""Building blocks shared by agents and mixers."""
