-- Evaluate queries (issue 8, spec 003). Loaded data tables: every version is kept (its rows in
-- a storage table of their own, `__position` giving the row order) and the head names the
-- current one. Query evaluations: the query as submitted (with the fold count of a k-fold
-- sweep), the source versions it resolved to, and its result (the 003 response, every scalar
-- metric whatever the select, and the sources the run read).
CREATE TABLE data_tables (
    name VARCHAR NOT NULL, version VARCHAR NOT NULL, n_rows BIGINT NOT NULL,
    columns_json VARCHAR NOT NULL, key_column VARCHAR, links_json VARCHAR NOT NULL,
    source VARCHAR, storage_table VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (name, version));

CREATE TABLE data_table_heads (
    name VARCHAR PRIMARY KEY, version VARCHAR NOT NULL, updated_at TIMESTAMP NOT NULL);

CREATE TABLE query_evaluations (
    eval_id VARCHAR PRIMARY KEY, query_json VARCHAR NOT NULL, folds INTEGER,
    sources_json VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL);

CREATE TABLE query_results (
    eval_id VARCHAR PRIMARY KEY, run_id VARCHAR, result_json VARCHAR NOT NULL,
    metrics_json VARCHAR NOT NULL, sources_json VARCHAR NOT NULL,
    elapsed_seconds DOUBLE NOT NULL, created_at TIMESTAMP NOT NULL);
