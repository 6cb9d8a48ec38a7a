"""Failure classification: a trial's ending in, its verdict (status, reason, evidence, confidence) out.

* `patterns`: the table (data): one row per failure ladder recognises, each backed by real output;
* `rules`: pure: which matched line is the root cause, and how sure the verdict is (text and exit facts in);
* `scoring`: how right the classifier is on a labelled corpus (pure);
* `files` and `cli`: reading a trial folder from disk, and `python -m ladder.failures`.
"""
