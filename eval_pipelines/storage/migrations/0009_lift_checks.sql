-- Live lift (issue 19): the case each workspace's traffic is an instance of, so an offline
-- screening is matched to a live claim on the workspace's case and lever, never on a variant
-- name alone.
CREATE TABLE lift_workspace_cases (
    workspace_id VARCHAR PRIMARY KEY, case_id VARCHAR NOT NULL, updated_at TIMESTAMP NOT NULL);
