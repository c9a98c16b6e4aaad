"""Which of `./studioctl test`'s two passes a test runs in (launcher/testing.py: SQLite and an embedded
Redis first, then PostgreSQL and Redis)."""

import os

import pytest

TEAM_SCALE_PASS = os.environ.get("DATABASE_URL", "").startswith("postgres")

# A test that starts its own studio on a SQLite file and its own Redis (a real worker, `up`, daphne)
# reads nothing of the team-scale pass's services: run again there, it would repeat itself unchanged.
first_pass_only = pytest.mark.skipif(
    TEAM_SCALE_PASS, reason="runs its own SQLite studio and Redis; the first pass ran it"
)

# A test in a studio of the team-scale pass whose subject the database and broker cannot change (an engine's
# memory in the worker's pool process, say): its neighbours in that studio run in both passes, it in the first.
database_independent = pytest.mark.skipif(
    TEAM_SCALE_PASS, reason="what it checks does not depend on the database or the broker; the first pass ran it"
)
