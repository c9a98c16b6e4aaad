"""Rollout Studio's trainer library: GRPO-family RL post-training in plain torch + transformers.

Never imports Django, Celery or Channels. Entry points: `trainers.run.loop.train`,
`trainers.run.evaluate.evaluate`, and the CLI (`python -m trainers run|eval|score`).
"""
