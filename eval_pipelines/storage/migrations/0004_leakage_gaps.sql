-- The leakage gap of a holdout evaluation (issue 7, `--leakage-check`): the baseline scored
-- ungrouped on the same sample, compared per level with the grouped baseline.
CREATE TABLE leakage_gaps (
    eval_id VARCHAR PRIMARY KEY, payload VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL);
