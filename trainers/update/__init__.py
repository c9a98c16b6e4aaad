"""Update: turning scored episodes into gradients.

- `batches`         `TokenBatch`: prompts and completions as tensors
- `logprobs`        per-token logprobs and entropy, the LM head in chunks of bounded memory
- `micro_batching`  splitting a batch into micro-batches (padded, balanced or packed)
- `packing`         first-fit-decreasing packing of sequences into rows
- `precision`       autocast for the forward passes

Import the submodule you need; this package imports nothing.
"""
