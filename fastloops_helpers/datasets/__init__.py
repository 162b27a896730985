"""Data sets: a reader of each real format and a seeded synthetic generator of the same format.

Generated data is cached under `config.data_dir()`; nothing is downloaded at run time.
"""
