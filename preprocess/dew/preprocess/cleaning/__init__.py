"""Corpus cleaning: quality filters with a reason code for every document they drop."""
