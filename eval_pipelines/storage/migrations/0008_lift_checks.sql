-- Live lift (issue 19): the case each workspace's traffic is an instance of, so an offline
-- screening is matched to a live claim on the workspace's case and lever, never on a variant
-- name alone; and the key source of each logged row (Assignment.key_source), for the check
-- that trace-keyed clusters are not single requests.
CREATE TABLE lift_workspace_cases (
    workspace_id VARCHAR PRIMARY KEY, case_id VARCHAR NOT NULL, updated_at TIMESTAMP NOT NULL);

ALTER TABLE lift_events ADD COLUMN key_source VARCHAR;
