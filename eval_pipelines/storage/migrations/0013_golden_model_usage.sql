-- What the model calls of a golden run's metered steps (``chat`` nodes) did, per run and per
-- case: calls the endpoint answered now (paid), calls served from a cache (the chat_calls
-- cache, or the whole step from the step cache: free), calls that got no answer, the tokens
-- the endpoint reported for the calls made now and their cost from the node's price table.
-- All NULL when the run had no metered step; model_cost NULL with model_cost_note when the
-- model has no price.
ALTER TABLE golden_runs ADD COLUMN model_calls INTEGER;
ALTER TABLE golden_runs ADD COLUMN model_calls_from_cache INTEGER;
ALTER TABLE golden_runs ADD COLUMN model_calls_failed INTEGER;
ALTER TABLE golden_runs ADD COLUMN input_tokens BIGINT;
ALTER TABLE golden_runs ADD COLUMN output_tokens BIGINT;
ALTER TABLE golden_runs ADD COLUMN model_cost DOUBLE;
ALTER TABLE golden_runs ADD COLUMN model_cost_note VARCHAR;
ALTER TABLE golden_results ADD COLUMN model_calls INTEGER;
ALTER TABLE golden_results ADD COLUMN model_calls_from_cache INTEGER;
ALTER TABLE golden_results ADD COLUMN model_calls_failed INTEGER;
ALTER TABLE golden_results ADD COLUMN input_tokens BIGINT;
ALTER TABLE golden_results ADD COLUMN output_tokens BIGINT;
ALTER TABLE golden_results ADD COLUMN model_cost DOUBLE;
ALTER TABLE golden_results ADD COLUMN model_cost_note VARCHAR;
