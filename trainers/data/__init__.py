"""Data: where a run's prompts come from and how they reach the model.

- `readers`        the one reader of dataset files (JSONL / JSON list, CSV, Parquet, Arrow, HF folders)
- `text_encoding`  which text encoding a CSV or JSONL file is in
- `rows`           a record mapped to what a run needs (`map_row`, `PromptRow`)
- `prompts`        rows rendered through the chat template and tokenised (`load_prompts`, `encode_chat`)
- `source`         the training prompt stream, resumable from its position (`PromptSource`)
- `procedural/`    generated tasks with a difficulty knob, instead of a dataset

Import the submodule you need; this package imports nothing.
"""
