"""Celery workers: the only package that knows both the studio's database and the trainer library."""
