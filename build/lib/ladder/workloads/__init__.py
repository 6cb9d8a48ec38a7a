"""Workloads: how a case becomes a trial spec (argv, env, files). The proxy trainer is a separate program."""
