# GPU worker: consumes the `gpu` queue (training and evaluation runs). Needs the NVIDIA container toolkit.
FROM pytorch/pytorch:2.9.1-cuda12.8-cudnn9-runtime
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 STUDIO_DATA_DIR=/data
WORKDIR /app
COPY requirements.txt .
# torch comes with the base image; every range in requirements.txt accepts it.
RUN pip install -r requirements.txt
COPY . .
CMD ["celery", "-A", "workers.app", "worker", "-Q", "gpu", "-c", "1", "-n", "gpu@%h", "--loglevel", "INFO"]
