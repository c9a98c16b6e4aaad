"""Demos and test subjects: the tiny model built locally (`tiny`), the first-start demo (`demo`)
and the agent demo with its warm-up (`agent_demo`).

Import the submodule you need; this package imports nothing.
"""
