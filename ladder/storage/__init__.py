"""Storage: what a sweep keeps. Optuna studies and trials (through Optuna's public storage API), turn-taking and
heartbeats between processes, the journal file and its repair, trials reused from earlier sweeps, the TSV files and
their merge, and the sweep folders on disk. Nothing here starts or ends a process: abandoned trials are returned to
the sweep, which ends them."""
