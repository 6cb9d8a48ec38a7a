"""`python -m ladder.workloads.proxy`: the proxy trainer's command line (`loop.main`)."""

from ladder.workloads.proxy.loop import main

main()
