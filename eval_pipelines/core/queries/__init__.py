"""Evaluate queries (spec 003): choose test rows, hide them from one fitted model, predict or
estimate each one, and report discrimination, probability-quality and regression metrics."""
