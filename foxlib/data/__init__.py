"""The data the models train on: the S&P 500 and NASDAQ daily prices shipped with `arch`, their features
and time-split windows (market), and a vectorised trading environment over them (trading_env).

Layer rule (core < data < memory < models < harness < waves < report < run; tests/test_layout.py
checks it): data imports foxlib.core only.
"""
