"""Run: the training loop and what surrounds it.

- `loop`        `train(spec, reporter, should_stop)`: the steps of a run (`Trainer`)
- `checkpoint`  saving and resuming a run's whole state
- `checkpoint_folders`  the `step-N` folder names, torch-free (the studio reads them)
- `validation`  held-out prompts scored during training (val/ curves)
- `evaluate`    a checkpoint scored on a dataset, without training
- `records`     an episode as the `Reporter` receives it (`episode_rollout`)
- `seeding`     one seed for every random stream
- `sft`         supervised warm-up on transcripts (the agent demos', and a run's warm_up section)

Import the submodule you need; this package imports nothing.
"""
