"""Environments: what follows each of the model's turns in a multi-turn episode.

`base` holds the interface and the data that crosses it; `catalog` the torch-free schema of
the kinds and tools (the studio renders forms from it); each kind's code lives in its own
module and registers its class in `ENVIRONMENTS` (see `base`).
"""
