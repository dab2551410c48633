"""Wave 8.10: the TFT's memory profile, the ensemble beside it, and the seed's figures explained.

measuring.py does the work on a device and returns plain data (JSON-able, bytes); records.py types it
(`Measurement`, with a schema version); analysis.py turns a Measurement into checks and figures on raw
bytes; tables.py only formats. Nothing after measuring.py touches a model. Callers import what they use
from the module that defines it (no re-exports here).
"""
