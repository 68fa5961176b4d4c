-- Live lift (issue 19 item 7): the outcome audit. Each row is one request's outcome
-- established independently of the logging path (human review, ground truth), set beside
-- its logged outcome by the check before reading that compares the arms' disagreements. A
-- request is audited once; its audited outcome never changes.
CREATE TABLE lift_audits (
    request_id VARCHAR PRIMARY KEY, workspace_id VARCHAR NOT NULL,
    exposure_epoch VARCHAR NOT NULL, audited_outcome BOOLEAN NOT NULL, note VARCHAR,
    path VARCHAR NOT NULL, line BIGINT NOT NULL, ingested_at TIMESTAMP NOT NULL);
