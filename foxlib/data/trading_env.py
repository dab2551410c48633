"""A small vectorised trading environment over the real market data (foxlib.data.market).

Each of `n_envs` sub-environments trades one index (S&P 500 or NASDAQ, drawn per episode)
over a fixed-length episode that starts on a random day:

- observation at day t: the last `window` days (t-window+1 .. t) of the first `n_features`
  market features of that index, flattened to (window * n_features,) float32. The features
  are the z-scored ones of `market_features`; they only use prices up to the close of day t.
- action at day t: 0 short, 1 flat, 2 long -> position -1 / 0 / +1, held from the close of
  day t to the close of day t+1.
- reward: REWARD_SCALE * (position * r_t - cost * |position - previous position|), where r_t is
  the log return from day t to t+1 and cost is charged per unit of turnover (1e-4 = 1 basis
  point by default). REWARD_SCALE = 100 puts rewards in percent, O(1) (daily index returns
  have a standard deviation of about 1.3 %), the same scale as data.TARGET_SCALE.
  Every episode starts flat, so the first step pays for opening a position.
- done: True on the last step of an episode (after `episode_length` rewards). The learners
  treat it as terminal (no bootstrapping past it). The sub-environment then resets itself
  (auto-reset, as gymnasium's vector envs do): the returned observation is the first one of
  the next episode and info["final_obs"] holds the last observation of the finished one.

Split by time: "train" episodes only touch days before `train_end` (the first validation
day, 2015-01-01); "evaluation" episodes only touch days on or after it. "Touch" covers the
observation windows and the days the rewarded returns end on, so no episode crosses the
split. Deterministic for a fixed seed: all randomness comes from one numpy Generator.

The API is gymnasium-like without the dependency:

    env = TradingEnv(n_envs=4, window=10, n_features=8, episode_length=64, split="train", seed=0)
    obs = env.reset()                                  # (n_envs, obs_dim) float32
    obs, reward, done, info = env.step(actions)        # actions: (n_envs,) ints in {0, 1, 2}
"""
from __future__ import annotations

import numpy as np

from foxlib.data.market import SERIES, market_features

N_ACTIONS = 3
POSITIONS = np.array([-1.0, 0.0, 1.0])
"""Position taken by each action: 0 short, 1 flat, 2 long."""
REWARD_SCALE = 100.0
"""Rewards are in percent: 100 * (position * log return - cost * turnover)."""
SPLITS = ("train", "evaluation")


class TradingEnv:
    """`n_envs` independent trading episodes stepped together (see the module docstring)."""

    def __init__(self, n_envs: int = 1, window: int = 10, n_features: int = 8, episode_length: int = 64,
                 split: str = "train", seed: int = 0, cost: float = 1e-4):
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
        if n_envs < 1 or window < 1 or episode_length < 1:
            raise ValueError("n_envs, window and episode_length must be at least 1")
        features = market_features(n_features)
        self.n_envs, self.window, self.n_features = n_envs, window, n_features
        self.episode_length, self.split, self.cost = episode_length, split, cost
        self.obs_dim = window * n_features
        self.n_actions = N_ACTIONS
        self.train_end = features.train_end
        self._observed = features.observed                                  # (S, N, F) float32
        self._returns = features.next_return                                # (S, N) float64
        n_days = self._returns.shape[1]
        # An episode starting at t0 observes days t0-window+1 .. t0+L-1 and is rewarded with the
        # returns from t0 .. t0+L-1 to the next day, i.e. it touches days t0-window+1 .. t0+L.
        if split == "train":
            lo, hi = window - 1, self.train_end - 1 - episode_length        # t0 + L <= train_end - 1
        else:
            lo, hi = self.train_end + window - 1, n_days - 1 - episode_length  # t0 + L <= N - 1
        if hi < lo:
            raise ValueError(f"no {split} episodes of length {episode_length} with window {window}")
        self.first_start, self.last_start = lo, hi
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._series = np.zeros(n_envs, dtype=np.int64)
        self._day = np.zeros(n_envs, dtype=np.int64)
        self._step = np.zeros(n_envs, dtype=np.int64)
        self._position = np.zeros(n_envs)
        self._episode_return = np.zeros(n_envs)
        self._started = False

    # ------------------------------------------------------------------ internals
    def _start(self, envs: np.ndarray) -> None:
        """Start fresh episodes (random index, random start day, flat) in sub-environments `envs`."""
        n = len(envs)
        self._series[envs] = self._rng.integers(0, len(SERIES), size=n)
        self._day[envs] = self._rng.integers(self.first_start, self.last_start + 1, size=n)
        self._step[envs] = 0
        self._position[envs] = 0.0
        self._episode_return[envs] = 0.0

    def _observe(self, series: np.ndarray, day: np.ndarray) -> np.ndarray:
        days = day[:, None] + np.arange(1 - self.window, 1)[None, :]       # (n, window)
        return self._observed[series[:, None], days].reshape(len(day), self.obs_dim)

    # ------------------------------------------------------------------ API
    def reset(self, seed: int | None = None) -> np.ndarray:
        """Start every sub-environment afresh; re-seed first when `seed` is given."""
        if seed is not None:
            self.seed, self._rng = seed, np.random.default_rng(seed)
        self._start(np.arange(self.n_envs))
        self._started = True
        return self._observe(self._series, self._day)

    def step(self, actions) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
        """Apply `actions` (n_envs,) in {0, 1, 2}; returns obs, reward (float32), done (bool), info.

        info: "position" and "log_return" (the unscaled return) behind each reward, "day" and
        "series" it was earned on, "final_obs" (obs_dim rows; only meaningful where done) and
        "episode_return" (the summed reward of episodes that ended now, NaN elsewhere)."""
        if not self._started:
            raise RuntimeError("call reset() before step()")
        actions = np.asarray(actions).reshape(-1)
        if actions.shape != (self.n_envs,) or not np.isin(actions, (0, 1, 2)).all():
            raise ValueError(f"actions must be {self.n_envs} integers in {{0, 1, 2}}, got {actions!r}")
        position = POSITIONS[actions.astype(np.int64)]
        log_return = self._returns[self._series, self._day]
        reward = REWARD_SCALE * (position * log_return - self.cost * np.abs(position - self._position))
        info = {"position": position, "log_return": log_return,
                "day": self._day.copy(), "series": self._series.copy()}
        self._position = position
        self._episode_return += reward
        self._day += 1
        self._step += 1
        done = self._step >= self.episode_length
        obs = self._observe(self._series, self._day)
        info["final_obs"] = obs.copy()
        info["episode_return"] = np.where(done, self._episode_return, np.nan)
        if done.any():
            ended = np.flatnonzero(done)
            self._start(ended)
            obs[ended] = self._observe(self._series[ended], self._day[ended])
        return obs, reward.astype(np.float32), done, info


def backtest(policy, window: int, n_features: int, split: str = "train", cost: float = 1e-4) -> float:
    """Mean reward per day of a deterministic `policy` run over every day of a split, both indices.

    policy: obs (n, window * n_features) float32 numpy -> actions (n,) in {0, 1, 2}. The policy
    trades every day t of the split whose observation window and next-day return stay inside
    it (the same days episodes may touch), starting flat on each index; the reward is the
    environment's (percent, turnover cost on consecutive days). A fixed, noise-free yardstick:
    the same policy always scores the same."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    features = market_features(n_features)
    te, n_days = features.train_end, features.next_return.shape[1]
    days = np.arange(window - 1, te - 1) if split == "train" else np.arange(te + window - 1, n_days - 1)
    idx = days[:, None] + np.arange(1 - window, 1)[None, :]
    rewards = []
    for s in range(len(SERIES)):
        obs = features.observed[s][idx].reshape(len(days), window * n_features)
        position = POSITIONS[np.asarray(policy(obs)).astype(np.int64)]
        turnover = np.abs(np.diff(position, prepend=0.0))
        rewards.append(REWARD_SCALE * (position * features.next_return[s, days] - cost * turnover))
    return float(np.concatenate(rewards).mean())
