"""`python -m ladder.report <sweep folder>`: plots and report.md for a sweep (ladder.ui.report)."""

import sys

from ladder.ui.report.build import main

if __name__ == "__main__":
    sys.exit(main())
