"""Pairs of strings: one record a `left<TAB>right` line."""
