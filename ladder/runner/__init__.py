"""The runner owns trial processes: the machine a sweep runs on, device leases, the preflight, launching a trial
under its supervisor and memory cgroup, sampling it, reading its first failure evidence, and stopping it whole.

`trial.run` is the entry: a `TrialRequest` in, a `Result` out, every process of the trial dead and reaped.
"""
