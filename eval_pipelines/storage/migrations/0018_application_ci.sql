-- Application CI (issue 31 item 7, spec 004's second kind of evidence): each recorded CI
-- result of a candidate, from the team's own harness or from the activation gate's runs of
-- a workflow revision. One row per workspace, candidate, source, commit, suite and golden
-- runs (none for a harness: a later gate run of the same revision is another result):
-- recording the same result again changes nothing, another result under the same key is
-- refused (a recorded result is history, never overwritten).
CREATE TABLE application_ci_results (
    workspace_id VARCHAR NOT NULL, candidate VARCHAR NOT NULL, source VARCHAR NOT NULL,
    commit_id VARCHAR NOT NULL, suite VARCHAR NOT NULL, passed_count BIGINT NOT NULL,
    failed_count BIGINT NOT NULL, skipped_count BIGINT NOT NULL, binds VARCHAR NOT NULL,
    golden_run_ids_json VARCHAR NOT NULL, detail VARCHAR, recorded_at TIMESTAMP NOT NULL,
    PRIMARY KEY (workspace_id, candidate, source, commit_id, suite, golden_run_ids_json));
