"""Datasets read where another library prepared them: Hugging Face (`hf`) and TFDS (`tfds`).

Each provider module imports its library when a spec is first read, never at import, so importing
dew.data registers both kinds without paying for datasets or tensorflow_datasets.
"""
