"""Procedural tasks: generated, self-checking problems with a difficulty knob (`generators`),
their pools and held-out sets (`rows`), and the adaptive difficulty of a run (`controller`,
`source`). Importing the package needs no torch."""

from trainers.procedural.generators import GENERATORS, Problem, TaskGenerator, procedural_rubric

__all__ = ["GENERATORS", "Problem", "TaskGenerator", "procedural_rubric"]
