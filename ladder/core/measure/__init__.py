"""Measuring a trial: its window, its figures, its rate's interval, step noise, and its repeats.

One concept a module; import the module that owns a name (`ladder.core.measure.window.open_window`).
"""
