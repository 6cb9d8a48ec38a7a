import os
import sys

from ladder.failures.cli import main

try:
    code = main()
except BrokenPipeError:  # the reader stopped reading (`| head`): not an error
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    code = 0
sys.exit(code)
