"""Model serving on the worker: the Celery task that starts, watches and stops a model's server
process (`task`), and the transformers-based OpenAI-compatible server used where vLLM is not
installed (`hf_server`, with `chat` for templates and tool calls)."""
