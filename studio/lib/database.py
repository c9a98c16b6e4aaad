"""Options of the studio's connections to PostgreSQL (the settings module applies them)."""

from __future__ import annotations

# A process that hangs inside a transaction (SIGSTOP, a frozen VM, a debugger) keeps its row locks for as
# long as its connection lives, and the server cannot tell it from a slow one. A worker's report holds
# its run's row (studio.runs.events.record updates last_seq) until it commits, so the sweeper's UPDATE
# that ends the lost run would wait behind it for ever, and with it every later sweep of that worker's
# heartbeat thread. The server ends a session idle in a transaction this long, which releases its locks;
# the studio's own transactions never wait that long between two statements.
IDLE_IN_TRANSACTION_S = 60.0


def postgres_options(idle_in_transaction_s: float) -> dict[str, str]:
    """Django's OPTIONS for a PostgreSQL database: libpq `options` that make the server end a session
    idle inside a transaction for longer than `idle_in_transaction_s` seconds (0: never)."""
    if idle_in_transaction_s < 0:
        raise ValueError(f"idle_in_transaction_s must be 0 (off) or more, got {idle_in_transaction_s}")
    if idle_in_transaction_s == 0:
        return {}
    return {"options": f"-c idle_in_transaction_session_timeout={round(idle_in_transaction_s * 1000)}"}
