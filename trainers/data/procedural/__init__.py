"""Procedural tasks: generated, self-checking problems with a difficulty knob. `catalog` names the
tasks with their levels (what the settings read), `generators` makes the rows, `rows` their pools
and held-out sets, `controller` and `source` the adaptive difficulty of a run. No torch."""
