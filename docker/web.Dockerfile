# Web tier: daphne (HTTP + websockets). CPU-only torch: the web process never imports it,
# but `bootstrap` builds the tiny demo model in a child process.
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 STUDIO_DATA_DIR=/data
WORKDIR /app
# bubblewrap: the sandbox for user reward code (python, code_exec criteria); without it workers refuse that code.
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap && rm -rf /var/lib/apt/lists/*
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
COPY requirements.txt .
RUN pip install -r requirements.txt
COPY . .
RUN python manage.py collectstatic --noinput -v0 || true
EXPOSE 8000
CMD ["sh", "-c", "python manage.py migrate --noinput && python manage.py bootstrap && exec daphne -b 0.0.0.0 -p 8000 studio.asgi:application"]
