"""The job's entry point for spark-submit: `spark-submit streaming/submit.py run --bootstrap-servers HOST:PORT`.

Arguments are those of the `coordinator` command; the master comes from spark-submit.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from streaming.cli import main  # noqa: E402 - the path must be set first when not installed

sys.exit(main())
