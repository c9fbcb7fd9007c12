"""``python -m spmd_mypy.migrate``: the same as ``spmd-migrate``."""

import sys

from spmd_mypy.migrate.cli import main

sys.exit(main())
