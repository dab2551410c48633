"""The peer benchmark's measuring code (benchmarks/peer_tft.py is its command line): the data both
models see, the models, foxlib's configurations and the torch.compile rows. The page is rendered by
foxlib/report/peer_page.py."""
