"""`python -m ladder.runner.warm MODULE ARGS...` (a rank's client) and `python -m ladder.runner.warm serve --socket
PATH` (a starter): the command lines ranks, starters and recorded cmd.txt files run."""

import sys

from ladder.runner.procs import exit_as
from ladder.runner.warm.client import main

if __name__ == "__main__":
    sys.exit(exit_as(main(sys.argv[1:])))
