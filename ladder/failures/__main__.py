import sys

from ladder.failures.cli import main

sys.exit(main())
