"""A database that goes away for a while: telling that apart from a bad write, and reconnecting.

A worker's writes (a run's reports, its heartbeat) meet two kinds of database error. One says the
database could not be reached or the connection broke (the server restarted, a failover, a network
cut, the backend terminated; on SQLite the file locked for longer than the busy timeout): the same
write can succeed later, on a new connection. The other is about what was written (a bad value, a
constraint): writing it again would only fail again, so it is raised as before.
"""

from __future__ import annotations

import contextlib

from django.db import DatabaseError, InterfaceError, OperationalError, connection

# SQLite's result codes (Python's `sqlite_errorname`, extended codes included: SQLITE_BUSY_SNAPSHOT...)
# that a later try can cure; SQLITE_ERROR ("no such table", a syntax error) is not among them.
SQLITE_PASSING = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_IOERR", "SQLITE_CANTOPEN", "SQLITE_FULL", "SQLITE_PROTOCOL")


def database_unreachable(exc: BaseException) -> bool:
    """True for an error that a later try on a new connection can cure (see the module docstring)."""
    if isinstance(exc, InterfaceError):  # the connection is closed or lost
        return True
    if not isinstance(exc, OperationalError):  # DataError, IntegrityError, ProgrammingError...: the write's fault
        return False
    name = getattr(exc.__cause__, "sqlite_errorname", None)
    if name is None:  # PostgreSQL: connection refused or lost, a terminated backend, the server shutting down
        return True
    return name.startswith(SQLITE_PASSING)


def drop_connection() -> None:
    """Close this thread's database connection, so that the next query opens a new one (a broken
    connection is never usable again; Django does not notice that outside a request)."""
    with contextlib.suppress(DatabaseError):
        connection.close()
