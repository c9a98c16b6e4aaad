"""Sweeps: a search over an experiment's own settings, run by Optuna with its storage in the studio's
database; each trial is an ordinary run of the experiment, pruned through the normal stop path."""
