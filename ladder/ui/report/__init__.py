"""`python -m ladder.report <sweep folder>`: PNG plots and a one-page report.md next to the sweep's TSVs.

`charts` builds the series behind each plot from the sweep's rows and `page` report.md's text (both pure, tested as
data); `draw` turns the series into pictures with matplotlib (Agg); `build` reads the sweep folder and writes
everything.
"""
