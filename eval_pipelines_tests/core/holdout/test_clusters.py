"""Clusters of sampled records held out together (the unit a paired bootstrap resamples)."""

from __future__ import annotations

from eval_pipelines.core.holdout.clusters import sample_clusters


def test_records_held_out_together_share_a_cluster_transitively() -> None:
    keys = ["a", "b", "c", "d", "e"]
    # a-b share a group; b-d are near-duplicates; c and e stand alone; x was not sampled.
    pairs = [("a", "a"), ("a", "b"), ("b", "d"), ("c", "x"), ("e", "e")]
    assert sample_clusters(keys, pairs) == [0, 0, 1, 0, 2]


def test_no_links_means_one_cluster_per_record() -> None:
    assert sample_clusters(["a", "b", "c"], []) == [0, 1, 2]
