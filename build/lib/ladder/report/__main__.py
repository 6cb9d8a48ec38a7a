import sys

from ladder.report.build import main

sys.exit(main())
