"""`python -m coordinator_cli ARGS` runs `coordinator ARGS`."""

import sys

from .main import main

sys.exit(main())
