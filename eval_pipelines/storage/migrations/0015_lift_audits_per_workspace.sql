-- Live lift (issue 28 item 13): a request id is unique within its workspace, not across
-- workspaces (two serving systems may both number their requests from 1001), so an audit is
-- keyed on (workspace_id, request_id). DuckDB cannot change a primary key in place: the
-- table is copied into one with the new key, every row kept.
CREATE TABLE lift_audits_by_workspace (
    request_id VARCHAR NOT NULL, workspace_id VARCHAR NOT NULL,
    exposure_epoch VARCHAR NOT NULL, audited_outcome BOOLEAN NOT NULL, note VARCHAR,
    path VARCHAR NOT NULL, line BIGINT NOT NULL, ingested_at TIMESTAMP NOT NULL,
    PRIMARY KEY (workspace_id, request_id));

INSERT INTO lift_audits_by_workspace
    SELECT request_id, workspace_id, exposure_epoch, audited_outcome, note, path, line,
        ingested_at
    FROM lift_audits;

DROP TABLE lift_audits;

ALTER TABLE lift_audits_by_workspace RENAME TO lift_audits;
