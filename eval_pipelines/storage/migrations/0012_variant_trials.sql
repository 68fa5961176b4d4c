-- Every trial of a variant whose classifier asks each record several times (chat with
-- `trials` N): one row per evaluation, variant, record and trial 1..N. Trial 1 is also the
-- variant's row in `predictions`; the other trials are kept here for per-record agreement and
-- the A/A flip rate of the model's own non-determinism. Replaced with the predictions.
CREATE TABLE variant_trials (
    eval_id VARCHAR NOT NULL, variant VARCHAR NOT NULL, record_key VARCHAR NOT NULL,
    trial INTEGER NOT NULL, code VARCHAR, confidence DOUBLE, route VARCHAR, error VARCHAR,
    PRIMARY KEY (eval_id, variant, record_key, trial));
