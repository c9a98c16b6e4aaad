"""`python -m trainers ...`: see `trainers.cli`."""

import sys

from trainers.cli import main

sys.exit(main())
