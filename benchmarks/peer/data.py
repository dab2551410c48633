"""The peer benchmark's data: foxlib's market windows as pytorch-forecasting's TimeSeriesDataSet, and
the same training windows for both models (inputs and targets checked equal).

Used by benchmarks/peer_tft.py; needs pandas and, for the dataset, pytorch-forecasting.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

CALENDAR = ("day_of_week", "month", "day_of_month", "week_of_year")  # foxlib.data.market._known's order


def market_frame(n_observed: int):
    """The training period of foxlib's market features in long format, one row per (series, day).

    Columns: series (static categorical), time_idx, target (the day's log return in percent: the
    return from the previous close, which is what foxlib's window predicts at that decoder day),
    the four calendar features (known) and the n_observed observed features (unknown)."""
    import pandas as pd

    from foxlib.data.market import SERIES, TARGET_SCALE, market_features
    f = market_features(n_observed)
    n = f.train_end
    frames = []
    for s, name in enumerate(SERIES):
        cols: dict[str, Any] = {"series": name, "time_idx": np.arange(n)}
        ret = np.zeros(n)  # day 0 has no previous close; it is never a decoder day (encoder_length >= 1)
        ret[1:] = f.next_return[s, : n - 1] * TARGET_SCALE
        cols["target"] = ret
        for j, c in enumerate(CALENDAR):
            cols[c] = f.calendar[:n, j]
        for j, c in enumerate(f.names):
            cols[c] = f.observed[s, :n, j]
        frames.append(pd.DataFrame(cols))
    df = pd.concat(frames, ignore_index=True)
    df["series"] = df["series"].astype("category")
    return df, list(f.names)


def peer_dataset(cfg):
    """pytorch-forecasting's TimeSeriesDataSet over the same windows as foxlib's MarketWindows("train")."""
    from pytorch_forecasting import TimeSeriesDataSet
    df, observed = market_frame(cfg.n_observed)
    reals = [*CALENDAR, *observed, "relative_time_idx"]
    return TimeSeriesDataSet(
        df, time_idx="time_idx", target="target", group_ids=["series"],
        min_encoder_length=cfg.encoder_length, max_encoder_length=cfg.encoder_length,
        min_prediction_length=cfg.decoder_length, max_prediction_length=cfg.decoder_length,
        static_categoricals=["series"],
        time_varying_known_reals=list(CALENDAR),          # + relative_time_idx: 5 known, as foxlib's N_KNOWN
        time_varying_unknown_reals=observed,
        add_relative_time_idx=True,                       # the horizon index's counterpart
        target_normalizer=None,                           # identity: foxlib's targets are not rescaled either
        scalers={c: None for c in reals},                 # identity: the features are already z-scored
    )


def same_batches(cfg, ds, seed: int):
    """foxlib's batch and the peer's (x, y) for the same `batch_size` training windows.

    The windows are those foxlib's example_batch draws (MarketWindows.sample with `seed`); the peer's
    samples are looked up by (series, first day) and collated by the dataset. Inputs are checked equal."""
    from foxlib.data.market import SERIES, MarketWindows
    windows = MarketWindows(cfg.n_observed, cfg.encoder_length, cfg.decoder_length, "train")
    rows = np.random.default_rng(seed).integers(0, len(windows), size=cfg.batch_size)  # as sample()
    fox = windows.get(rows)
    decoded = ds.decoded_index
    lookup = {(str(s), int(t)): i for i, (s, t) in enumerate(zip(decoded["series"], decoded["time_idx_first"]))}
    picked = [(SERIES[s], int(t0)) for s, t0 in windows.index[rows]]
    missing = [p for p in picked if p not in lookup]
    if missing:
        raise RuntimeError(f"windows {missing[:3]} are not in the peer's dataset: the two data sets differ")
    x, y = ds._collate_fn([ds[lookup[p]] for p in picked])
    check_same_inputs(fox, x, y, ds, cfg)
    return fox, (x, y), [{"series": s, "first_day": t} for s, t in picked]


def check_same_inputs(fox, x, y, ds, cfg) -> None:
    te = cfg.encoder_length
    idx = {name: i for i, name in enumerate(ds.reals)}
    observed = [n for n in ds.reals if n not in CALENDAR and n != "relative_time_idx"]
    cal = [idx[c] for c in CALENDAR]
    cont = torch.cat([x["encoder_cont"], x["decoder_cont"]], dim=1)
    pairs = {
        "observed (encoder)": (fox["observed"], x["encoder_cont"][..., [idx[n] for n in observed]]),
        "calendar (encoder and decoder)": (fox["known"][..., :4], cont[..., cal]),
        "target (decoder)": (fox["target"], y[0]),
    }
    for what, (a, b) in pairs.items():
        if a.shape != b.shape or not torch.allclose(a.float(), b.float(), rtol=1e-6, atol=1e-6):
            raise RuntimeError(f"foxlib's and the peer's batches differ in {what}: "
                               f"shapes {tuple(a.shape)} vs {tuple(b.shape)}")
    if x["encoder_cont"].shape[1] != te:
        raise RuntimeError("the peer's encoder length differs from foxlib's")


def check_recipe_batch(batch: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    """foxlib.harness.recipe's batch must be the windows compared with the peer's (same keys, equal tensors)."""
    if set(batch) != set(expected) or not all(torch.equal(batch[k].cpu(), expected[k].cpu()) for k in batch):
        raise RuntimeError("foxlib.harness.recipe's batch differs from the windows given to the peer: the recipe's "
                           "example_batch no longer draws the windows same_batches picks")


def to_device(obj, device):
    if torch.is_tensor(obj):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device(v, device) for v in obj)
    return obj
