"""The job's entry point for spark-submit: `spark-submit src/coordinator_cli/submit.py run ...`.

Arguments are those of the `coordinator` command; the master comes from spark-submit.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "src")]

from coordinator_cli.main import main  # noqa: E402 - the path must be set first when not installed

sys.exit(main())
