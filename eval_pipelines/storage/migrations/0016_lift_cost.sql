-- Live lift (issue 31, spec 004's cost bar): what each logged model invocation cost (tokens in
-- and out priced by the workspace's price table, or a cost amount with its currency) and its
-- execution envelope (model, provider, tools digest, response format, generation parameters,
-- streaming, provider policy), all optional; each workspace's cost options (the declared
-- decision intent with its budget, the envelope elements its lever changes, the price table:
-- claim options, not part of the split, so they start no epoch); and each claim's cost
-- document (its intent and frozen cost bound, stored when it opened, and its cost result).
ALTER TABLE lift_events ADD COLUMN input_tokens BIGINT;
ALTER TABLE lift_events ADD COLUMN output_tokens BIGINT;
ALTER TABLE lift_events ADD COLUMN cost DOUBLE;
ALTER TABLE lift_events ADD COLUMN currency VARCHAR;
ALTER TABLE lift_events ADD COLUMN model VARCHAR;
ALTER TABLE lift_events ADD COLUMN provider VARCHAR;
ALTER TABLE lift_events ADD COLUMN tools VARCHAR;
ALTER TABLE lift_events ADD COLUMN response_format VARCHAR;
ALTER TABLE lift_events ADD COLUMN generation_params VARCHAR;
ALTER TABLE lift_events ADD COLUMN streaming BOOLEAN;
ALTER TABLE lift_events ADD COLUMN provider_policy VARCHAR;

CREATE TABLE lift_cost_settings (
    workspace_id VARCHAR PRIMARY KEY, intent_json VARCHAR, lever_changes_json VARCHAR NOT NULL,
    prices_json VARCHAR, updated_at TIMESTAMP NOT NULL);

ALTER TABLE lift_claims ADD COLUMN cost_json VARCHAR;
