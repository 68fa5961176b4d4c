-- Offline cost (issue 31 item 5): the input and output tokens the endpoint reported for each
-- record's scored invocation (trial 1; an answer read from the call cache carries the tokens
-- it took when it was made), so a holdout report prices cost per record with an interval
-- over the sample's clusters. NULL in evaluations classified before this column: their report
-- says the per-record cost was not recorded, never a cost of 0.
ALTER TABLE predictions ADD COLUMN input_tokens BIGINT;
ALTER TABLE predictions ADD COLUMN output_tokens BIGINT;
