"""Real daily market data, offline: S&P 500 and NASDAQ OHLCV shipped with the `arch` package.

Each index's OHLCV gives a library of observed features (returns, volatility, range, volume, moving-average
gaps, oscillators, cross-index terms), z-scored with the training period's statistics; a model takes the first
`n_observed`. Known-future inputs are calendar features plus the horizon index; the static input is the series
id. Split by time: a training window ends before VALIDATION_START, a validation window starts after it.

Targets (TARGETS): "return", the next days' log returns in percent (what the models train on everywhere), or
"abs_return", their absolute values. Returns are close to unpredictable in sign but their size persists
(volatility clusters), so a model beats the climatology on "abs_return" by far more (foxlib.harness.training).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
import torch

SERIES = ("sp500", "nasdaq")
VALIDATION_START = pd.Timestamp("2015-01-01")
WARMUP_DAYS = 250  # the longest rolling window below; earlier rows have NaN features
N_KNOWN = 5  # calendar features + horizon index
TARGET_SCALE = 100.0  # targets are next-day log returns in percent
TARGETS = ("return", "abs_return")  # what a window's target is: the log return, or its absolute value


class MarketDataError(RuntimeError):
    """The offline market data is missing or unreadable."""


@lru_cache(maxsize=1)
def load_ohlcv() -> dict[str, pd.DataFrame]:
    """S&P 500 and NASDAQ daily OHLCV (1999-01-04 .. 2018-12-31), aligned on common dates."""
    try:
        from arch.data import nasdaq, sp500
        frames = {"sp500": sp500.load(), "nasdaq": nasdaq.load()}
    except Exception as exc:  # ImportError, a damaged install, a corrupt CSV
        raise MarketDataError(
            f"could not load the offline market data from the 'arch' package ({exc!r}); "
            "run `make venv` (or `pip install arch==8.0.0`) to reinstall it") from exc
    needed = ["Open", "High", "Low", "Close", "Volume"]
    for name, frame in frames.items():
        missing = [c for c in needed if c not in frame.columns]
        if missing or len(frame) < 2 * WARMUP_DAYS:
            raise MarketDataError(f"market data {name!r} is incomplete (missing columns {missing}, "
                                  f"{len(frame)} rows); reinstall the 'arch' package")
    common = frames["sp500"].index.intersection(frames["nasdaq"].index)
    return {name: frame.loc[common, needed].astype("float64") for name, frame in frames.items()}


def _rsi(close: pd.Series, n: int) -> pd.Series:
    delta = close.diff()
    up = delta.clip(lower=0).ewm(alpha=1 / n, adjust=False).mean()
    down = (-delta).clip(lower=0).ewm(alpha=1 / n, adjust=False).mean()
    return up / (up + down) - 0.5


def _features(own: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """The observed-feature library of one index, in a fixed order (53 columns)."""
    c, o, h, lo, v = own.Close, own.Open, own.High, own.Low, own.Volume
    r = np.log(c).diff()
    f: dict[str, pd.Series] = {}
    for k in range(10):
        f[f"ret_lag{k}"] = r.shift(k)
    for k in (2, 5, 10, 20, 60, 120, 250):
        f[f"ret_{k}d"] = np.log(c / c.shift(k))
    for k in (5, 10, 20, 60, 120):
        f[f"vol_{k}d"] = r.rolling(k).std()
    rng = np.log(h / lo)
    f["range"] = rng
    f["range_5d"] = rng.rolling(5).mean()
    f["range_20d"] = rng.rolling(20).mean()
    f["gap_open"] = np.log(o / c.shift(1))
    f["close_in_range"] = ((c - lo) / (h - lo).replace(0, np.nan)).fillna(0.5) - 0.5
    f["body"] = np.log(c / o)
    lv = np.log(v.replace(0, np.nan)).ffill()
    for k in (20, 60, 250):
        f[f"volume_z{k}"] = (lv - lv.rolling(k).mean()) / lv.rolling(k).std()
    f["volume_change"] = lv.diff()
    for k in (5, 10, 20, 50, 100, 200):
        f[f"ma_gap_{k}"] = np.log(c / c.rolling(k).mean())
    ema12, ema26 = c.ewm(span=12, adjust=False).mean(), c.ewm(span=26, adjust=False).mean()
    f["ema_gap_12"] = np.log(c / ema12)
    f["ema_gap_26"] = np.log(c / ema26)
    macd = (ema12 - ema26) / c
    f["macd"] = macd
    f["macd_signal"] = macd.ewm(span=9, adjust=False).mean()
    for k in (7, 14, 28):
        f[f"rsi_{k}"] = _rsi(c, k)
    low14, high14 = lo.rolling(14).min(), h.rolling(14).max()
    f["stoch_k14"] = (c - low14) / (high14 - low14) - 0.5
    f["drawdown_250"] = np.log(c / c.rolling(250).max())
    f["rally_250"] = np.log(c / c.rolling(250).min())
    f["skew_60"] = r.rolling(60).skew()
    f["kurt_60"] = r.rolling(60).kurt()
    f["parkinson_20"] = np.sqrt((rng ** 2).rolling(20).mean() / (4 * np.log(2)))
    r_other = np.log(other.Close).diff()
    f["other_ret"] = r_other
    f["corr_other_60"] = r.rolling(60).corr(r_other)
    return pd.DataFrame(f)


N_FEATURES_MAX = 53


def _known(dates: pd.DatetimeIndex) -> np.ndarray:
    """Calendar features of the given dates, each scaled into [-0.5, 0.5]: (len, 4)."""
    return np.stack([
        dates.dayofweek / 4.0 - 0.5,
        (dates.month - 1) / 11.0 - 0.5,
        (dates.day - 1) / 30.0 - 0.5,
        (dates.isocalendar().week.to_numpy() - 1) / 52.0 - 0.5,
    ], axis=1).astype("float32")


@dataclass(frozen=True)
class MarketFeatures:
    """Aligned, normalised daily features of every index."""
    dates: pd.DatetimeIndex          # (N,)
    names: tuple[str, ...]           # (F,)
    observed: np.ndarray             # (S, N, F) float32, z-scored with training-period stats
    calendar: np.ndarray             # (N, 4) float32
    next_return: np.ndarray          # (S, N) float64: log return from day t to t+1 (NaN on the last day)
    train_end: int                   # first index on or after VALIDATION_START


@lru_cache(maxsize=4)
def market_features(n_observed: int = N_FEATURES_MAX) -> MarketFeatures:
    """The first `n_observed` features of every index, from WARMUP_DAYS on."""
    if not 1 <= n_observed <= N_FEATURES_MAX:
        raise ValueError(f"n_observed must be in 1..{N_FEATURES_MAX}, got {n_observed}")
    ohlcv = load_ohlcv()
    frames = [_features(ohlcv[s], ohlcv[o]).iloc[WARMUP_DAYS:, :n_observed] for s, o in (SERIES, SERIES[::-1])]
    dates = frames[0].index
    raw = np.stack([f.to_numpy() for f in frames])  # (S, N, F)
    if not np.isfinite(raw).all():
        raise MarketDataError("market features contain NaN or infinite values: the data is corrupt")
    train_end = int(np.searchsorted(dates, VALIDATION_START))
    train = raw[:, :train_end].reshape(-1, raw.shape[-1])
    mean, std = train.mean(0), train.std(0) + 1e-8
    observed = np.clip((raw - mean) / std, -10, 10).astype("float32")
    closes = np.stack([np.log(ohlcv[s].Close.to_numpy()[WARMUP_DAYS:]) for s in SERIES])
    next_return = np.full(closes.shape, np.nan)
    next_return[:, :-1] = np.diff(closes, axis=1)
    return MarketFeatures(dates, tuple(frames[0].columns), observed, _known(dates), next_return, train_end)


class MarketWindows:
    """TFT windows: encoder_length observed days, then decoder_length days whose targets (TARGETS) a model
    forecasts. split: "train" or "validation"."""

    def __init__(self, n_observed: int, encoder_length: int, decoder_length: int, split: str = "train",
                 target: str = "return"):
        if split not in ("train", "validation"):
            raise ValueError(f"unknown split {split!r}; valid splits: train, validation")
        if target not in TARGETS:
            raise ValueError(f"unknown target {target!r}; valid targets: {', '.join(TARGETS)}")
        if encoder_length < 1 or decoder_length < 1:
            raise ValueError("encoder_length and decoder_length must be at least 1")
        self.features, self.target = market_features(n_observed), target
        self.encoder_length, self.decoder_length = encoder_length, decoder_length
        span, te = encoder_length + decoder_length, self.features.train_end
        # a window [t0, t0 + span) predicts returns of days t0+Te-1 .. t0+span-2 -> needs t0+span-1 < n
        starts = np.arange(0, te - span + 1) if split == "train" else np.arange(te, len(self.features.dates) - span)
        if len(starts) == 0:
            raise ValueError(f"no {split} windows of length {span} in the market data")
        series = np.repeat(np.arange(len(SERIES)), len(starts))
        self.index = np.stack([series, np.tile(starts, len(SERIES))], axis=1)  # (W, 2)

    def __len__(self) -> int:
        return len(self.index)

    def get(self, rows: np.ndarray | list[int], device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        """The windows at `rows` as a TFT batch dict."""
        f, te, td = self.features, self.encoder_length, self.decoder_length
        idx = self.index[np.asarray(rows)]
        s, t0 = idx[:, 0], idx[:, 1]
        enc = t0[:, None] + np.arange(te)[None, :]                     # (B, Te)
        full = t0[:, None] + np.arange(te + td)[None, :]                # (B, T)
        horizon = (np.arange(te + td) - te + 1) / (te + td)             # (T,), 0 at the first decoder step
        known = np.concatenate([f.calendar[full],
                                np.broadcast_to(horizon[None, :, None], full.shape + (1,))], axis=-1)
        batch = {  # torch.tensor copies: no batch tensor is a view into a larger array
            "static": torch.tensor(s[:, None], dtype=torch.long),
            "known": torch.tensor(known, dtype=torch.float32),
            "observed": torch.tensor(f.observed[s[:, None], enc]),
            "target": torch.tensor(self._targets(s, t0), dtype=torch.float32),
        }
        return {k: v.to(device) for k, v in batch.items()}

    def _targets(self, s: np.ndarray, t0: np.ndarray) -> np.ndarray:
        """(len(s), decoder_length) float64: at decoder step j the log return from day t0+Te-1+j to t0+Te+j."""
        te, td = self.encoder_length, self.decoder_length
        target = self.features.next_return[s[:, None], (t0 + te - 1)[:, None] + np.arange(td)[None, :]] * TARGET_SCALE
        return np.abs(target) if self.target == "abs_return" else target

    def targets(self) -> np.ndarray:
        """Every window's target (e.g. for the split's climatology)."""
        return self._targets(self.index[:, 0], self.index[:, 1])

    def sample(self, batch_size: int, seed: int = 0, device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        """A reproducible random batch of `batch_size` windows."""
        rng = np.random.default_rng(seed)
        return self.get(rng.integers(0, len(self), size=batch_size), device=device)
