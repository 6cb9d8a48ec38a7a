"""The pure core: the vocabulary, trial specs, paths, window statistics, what first steps predict of a window, the
pick, a case's outcome, the walk, and the decision table's class and action.

Values in, values out: nothing here starts a process or a thread, takes a lock, reads NVML or opens a storage
(`tests/unit/test_layers.py` checks it). Every other folder may import it; it imports none of them.
"""
