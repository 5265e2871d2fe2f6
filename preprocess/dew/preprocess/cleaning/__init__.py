"""Cleaning a text corpus ahead of tokenize: quality filters, exact and near-duplicate removal.

The pieces: `minhash` (normalized text, its exact hash, MinHash signatures and LSH band keys),
`components` (connected components of a graph of documents as Beam transforms), `plan` (the job's
config and the documents records it writes), `against` (reading an already committed documents
corpus), `removals` (the per-shard tables that say why each document went) and `corpus` (the whole
job as one PTransform).
"""
