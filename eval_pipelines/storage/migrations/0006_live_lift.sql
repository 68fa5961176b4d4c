-- Live lift (issue 9, spec 004). Ingested log files (each taken whole or not at all) and their
-- rows; each workspace's holdout settings; the lift ledger (one row per claim: its scope,
-- epoch, interval, n, status and the offline difference beside it); and the reports.
CREATE TABLE lift_files (
    file_id VARCHAR PRIMARY KEY, path VARCHAR NOT NULL, n_rows BIGINT NOT NULL,
    first_day DATE NOT NULL, last_day DATE NOT NULL, ingested_at TIMESTAMP NOT NULL);

CREATE TABLE lift_events (
    file_id VARCHAR NOT NULL, line BIGINT NOT NULL, day DATE NOT NULL, ts TIMESTAMP NOT NULL,
    request_id VARCHAR NOT NULL, workspace_id VARCHAR NOT NULL, cluster VARCHAR NOT NULL,
    exposure_arm VARCHAR NOT NULL, exposure_epoch VARCHAR NOT NULL, claim_type VARCHAR NOT NULL,
    situation_class VARCHAR NOT NULL, source VARCHAR NOT NULL, outcome BOOLEAN,
    artifact_key VARCHAR, candidate VARCHAR, baseline_head VARCHAR, app_config VARCHAR);

CREATE TABLE lift_day_cells (
    day DATE NOT NULL, workspace_id VARCHAR NOT NULL, claim_type VARCHAR NOT NULL,
    situation_class VARCHAR NOT NULL, exposure_arm VARCHAR NOT NULL, source VARCHAR NOT NULL,
    exposure_epoch VARCHAR NOT NULL, total BIGINT NOT NULL, resolved BIGINT NOT NULL,
    successes BIGINT NOT NULL, censored BIGINT NOT NULL, clusters BIGINT NOT NULL);

CREATE TABLE lift_settings (
    workspace_id VARCHAR PRIMARY KEY, holdout_fraction DOUBLE NOT NULL, epoch VARCHAR NOT NULL,
    lever VARCHAR, lever_holdout_share DOUBLE NOT NULL, updated_at TIMESTAMP NOT NULL);

CREATE TABLE lift_claims (
    claim_id VARCHAR PRIMARY KEY, workspace_id VARCHAR NOT NULL, claim_type VARCHAR NOT NULL,
    epoch VARCHAR NOT NULL, candidate VARCHAR, status VARCHAR NOT NULL, reason VARCHAR,
    verdict VARCHAR NOT NULL, estimate DOUBLE, low DOUBLE, high DOUBLE, mde DOUBLE,
    n_treated BIGINT NOT NULL, n_control BIGINT NOT NULL, clusters_treated BIGINT NOT NULL,
    clusters_control BIGINT NOT NULL, aa_json VARCHAR NOT NULL, baseline_head VARCHAR,
    app_config VARCHAR, offline_json VARCHAR, lift_json VARCHAR NOT NULL,
    opened_at TIMESTAMP NOT NULL, updated_at TIMESTAMP NOT NULL);

CREATE TABLE lift_reports (
    report_id VARCHAR PRIMARY KEY, run_id VARCHAR, report_json VARCHAR NOT NULL,
    markdown VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL);
