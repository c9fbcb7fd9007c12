"""``python -m spmd_mypy.coverage``: the same as ``spmd-coverage``."""

import sys

from spmd_mypy.coverage.cli import main

sys.exit(main())
