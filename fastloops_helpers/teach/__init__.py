"""The slides' replicas and deliberately slow versions, kept to be compared with the real ones."""
