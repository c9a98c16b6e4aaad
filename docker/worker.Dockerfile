# GPU worker: consumes the `gpu` queue (training and evaluation runs). Needs the NVIDIA container toolkit
# (the driver); the CUDA libraries come with PyPI's torch and vLLM wheels.
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 STUDIO_DATA_DIR=/data
WORKDIR /app
# bubblewrap: the sandbox for user reward code (python, code_exec criteria); without it workers refuse that code.
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap && rm -rf /var/lib/apt/lists/*
# torch first, pinned to what vLLM 0.32 is built for; every range in requirements.txt accepts it.
RUN pip install torch==2.13.0
COPY requirements.txt .
RUN pip install -r requirements.txt && pip install vllm==0.32.0
COPY . .
CMD ["celery", "-A", "workers.app", "worker", "-Q", "gpu", "-c", "1", "-n", "gpu@%h", "--loglevel", "INFO"]
