"""Wave 8.10: the TFT's memory profile, the ensemble beside it, and the seed's figures explained.

measuring.py measures (bytes), its measure() giving records.py's typed, checked Measurement; analysis.py decides on
raw bytes; tables.py only formats. Nothing after measuring.py touches a model.
"""
