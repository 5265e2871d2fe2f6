"""dew.preprocess: reusable, labelled Beam transforms that turn raw text into committed token corpora.

Read documents (dew.preprocess.documents), tokenize them (.tokenize), lay them out over splits and
shards (.layout), write and commit shards (.shards, .commit), write the packing plans the runtime
would compute (.pack), plan a mixture (.mixture); .corpus chains them into one transform. Importing
this package imports apache_beam; dew.data never imports it.
"""
