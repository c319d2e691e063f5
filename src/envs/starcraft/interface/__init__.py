"""SMAC's and SMACv2's environments over either engine, the choice between the engines, and replays."""
