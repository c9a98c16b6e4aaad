"""Models: what a run loads and where it comes from.

- `loading`     the policy and reference models (LoRA, dtype, activation checkpointing), the default device
- `hub`         hub ids and local folders: what a model path names, resolved offline
- `pretrained`  the packaged real model (SmolLM2-135M-Instruct from a GGUF), installed and converted once
- `quiet`       transformers' own progress bars and logs silenced around steps we report ourselves

Import the submodule you need; this package imports nothing.
"""
