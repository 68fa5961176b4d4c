"""The word a report shows instead of a figure drawn from too few observations.

Kept apart from :mod:`eval_pipelines.core.stats` (which imports ``scipy.stats``, half a
second) so that the CLI can print it in its help without importing any statistics.
"""

INSUFFICIENT = "insufficient_evidence"
