"""The data the models train on: the S&P 500 and NASDAQ daily prices shipped with `arch`, their features and
time-split windows (market), and a trading environment over them (trading_env). Imports foxlib.core only."""
