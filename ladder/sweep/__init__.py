"""The sweep: the step loop that composes the rest for one case (load → decide → claim → run → record), what an
earlier sweep's trials answer for, resuming, and the dry run."""
