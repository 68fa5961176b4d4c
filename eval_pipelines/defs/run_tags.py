"""The names every run of eval_pipelines carries: its code location and its tags.

A leaf: it imports nothing of the project (nor Dagster), so the definitions can tag their
jobs and the run machinery above them (:mod:`eval_pipelines.runs`) can read the same names.
"""

# The code location the UI, the daemon and the dispatcher serve, and what it loads.
LOCATION_NAME = "eval_pipelines"
DEFINITIONS_MODULE = "eval_pipelines.definitions"
DEFINITIONS_ATTRIBUTE = "defs"
# The name Dagster gives the one repository of a Definitions object.
SINGLE_REPOSITORY = "__repository__"

EVAL_TAG = "eval_pipelines/eval_id"
KIND_TAG = "eval_pipelines/kind"
LAUNCHED_BY_TAG = "eval_pipelines/launched_by"
PARTITION_TAG = "dagster/partition"
