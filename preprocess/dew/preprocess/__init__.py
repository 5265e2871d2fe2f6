"""dew.preprocess: reusable, labelled Beam transforms that turn raw corpora into committed directories.

Text: read documents (dew.preprocess.read_documents), tokenize them (.tokenizing), lay them out over splits and
shards (.layout), write the packing plans the runtime would compute (.pack), plan a mixture (.plan_mixture);
.tokenize_corpus chains them into one transform. Images: find and read them (.image_sources, .image_reading),
write image shards (.images) and tokenize their captions (.tokenize_captions). Every kind writes through the same
path: keyed records to shard files (.shards, .shard_files) and the commit protocol (.commit). Importing
this package imports apache_beam; dew.data never imports it.
"""
