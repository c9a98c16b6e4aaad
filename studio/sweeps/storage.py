"""Optuna's RDB storage in the studio's own database: the SQLAlchemy URL built from Django's connection
settings (the SQLite file, or PostgreSQL at team scale), so a sweep's search state lives beside its rows
and survives a restart. Optuna keeps its own tables there (studies, trials, trial_params...), which no
Django model names."""

from __future__ import annotations

import threading
from typing import Any

from django.db import connections

_lock = threading.Lock()
_storages: dict[str, Any] = {}  # URL -> RDBStorage: one engine (and its pool) per process


def database_url(alias: str = "default") -> str:
    """The SQLAlchemy URL of Django's database `alias`, as connected now (under tests: the test database)."""
    from sqlalchemy.engine import URL

    settings = connections[alias].settings_dict
    engine, name = settings["ENGINE"], str(settings["NAME"])
    if engine == "django.db.backends.sqlite3":
        if name.startswith("file:"):  # Django's in-memory test database, shared through a URI
            sep = "&" if "?" in name else "?"
            return f"sqlite:///{name}{sep}uri=true"
        return f"sqlite:///{name}"
    if engine == "django.db.backends.postgresql":
        query = {k: str(v) for k, v in (settings.get("OPTIONS") or {}).items() if k in ("sslmode", "sslrootcert")}
        url = URL.create("postgresql+psycopg", username=settings.get("USER") or None,
                         password=settings.get("PASSWORD") or None, host=settings.get("HOST") or None,
                         port=int(settings["PORT"]) if settings.get("PORT") else None, database=name, query=query)  # fmt: skip
        return url.render_as_string(hide_password=False)
    raise ValueError(f"sweeps keep their search in the studio's database: SQLite or PostgreSQL, not {engine}")


def storage(alias: str = "default"):
    """The process's RDBStorage for the studio's database (made once: it checks Optuna's tables)."""
    import optuna

    url = database_url(alias)
    with _lock:
        if url not in _storages:
            # SQLite: wait for a writer (the studio's web tier and workers write the same file) as Django does.
            kwargs: dict[str, Any] = {"pool_pre_ping": True}
            if url.startswith("sqlite"):
                kwargs = {"connect_args": {"timeout": 30}}
                if "mode=memory" in url:  # the test database: one connection per thread keeps it open
                    from sqlalchemy.pool import SingletonThreadPool

                    kwargs["poolclass"] = SingletonThreadPool
            _storages[url] = optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
        return _storages[url]
