"""Names every writing job shares: the Beam counter namespace, the splits, the tallies' tags and entries,
and the range of a record's draw. A kind's own names (its drop reasons, its stats) stay with the kind."""

from __future__ import annotations

# Every dew counter is counted under this Beam metrics namespace.
NAMESPACE = "dew.preprocess"
TRAIN, VAL = "train", "val"
# The tagged output a read step sends its per-input tallies on.
STATS_TAG = "stats"
# Tally entry listing each damaged input: its path, reason, rows read before the damage, error.
DAMAGED = "damaged_inputs"
# A record's draw (a hash of where it came from) is an integer in [0, DRAW): it decides split and shard.
DRAW = float(1 << 64)
# Per-shard tables beside the shards, named `<shard name minus ext><suffix>`: ingest-urls' fetch outcomes,
# and the documents the clean job removed (read by inspect, which must not import Beam).
STATUS_SUFFIX = ".status.parquet"
REMOVALS_SUFFIX = ".removals.parquet"
