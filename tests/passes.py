"""Which of `./studioctl test`'s two passes a test runs in (launcher/testing.py: SQLite and an embedded
Redis first, then PostgreSQL and Redis)."""

import os

import pytest

# A test that starts its own studio on a SQLite file and its own Redis (a real worker, `up`, daphne)
# reads nothing of the team-scale pass's services: run again there, it would repeat itself unchanged.
first_pass_only = pytest.mark.skipif(
    os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="runs its own SQLite studio and Redis; the first pass ran it",
)
