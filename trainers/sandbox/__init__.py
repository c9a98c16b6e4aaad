"""The sandbox for user code, tools, environments and model-written programs: separate, limited
processes under bubblewrap (`process`: isolation, workers, pools; `_child`: the interpreter side),
and programs run against tests (`programs`). See `process`'s docstring for what is enforced.

Import the submodule you need; this package imports nothing.
"""
