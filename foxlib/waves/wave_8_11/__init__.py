"""Wave 8.11: mixed precision — the memory and speed it buys, the accuracy it costs, all measured.

measuring.py measures; records.py types its data; analysis.py decides on raw values; tables.py only formats.
"""
