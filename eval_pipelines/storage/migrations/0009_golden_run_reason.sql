-- Why a golden run ended as it did, when it did not complete on its own: a row left
-- `running` by a run whose process was killed is closed as `failed` with its Dagster run's
-- state here.
ALTER TABLE golden_runs ADD COLUMN reason VARCHAR;
