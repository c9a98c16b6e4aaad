"""Environments from outside: packages (verifiers tasksets) installed into virtual environments of
their own, and the host side of the sandboxed process that runs them.

- `venvs`: where each package's environment lives and how the worker installs it (pip, the
  operator's index and allow-list, what failed said in words);
- `verifiers_host`: one sandboxed process per run holding the loaded taskset, answering `rows`
  and `score` over the sandbox's JSON protocol (`_verifiers_child.py` is the code it runs);
- `prepare`: what a run's settings become once the package is there (its tasks as the prompts,
  each reward function a criterion).
"""
