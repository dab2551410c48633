"""A vectorised trading environment over the real market data (foxlib.data.market), gymnasium-like without
the dependency, and what every agent trained in it shares (EnvConfig, greedy_policy).

Each of `n_envs` sub-environments trades one index (drawn per episode) over `episode_length` days from a
random start. The observation at day t is the last `window` days (t-window+1 .. t) of the index's first
`n_features` z-scored features, flattened, float32. Actions 0 / 1 / 2 take position -1 / 0 / +1 from the close of
day t to that of t+1, rewarded REWARD_SCALE * (position * r_t - cost * |position change|), r_t the log return
(percent, O(1): daily index returns have a standard deviation of about 1.3 %; cost 1e-4 = 1 basis point). Every
episode starts flat. done marks an episode's last step (terminal for the learners); the sub-environment then
resets itself, as gymnasium's vector envs do: info["final_obs"] holds the finished episode's last observation.

Split by time: "train" episodes touch (observe, or are rewarded with a return ending on) only days before
`train_end` (2015-01-01), "evaluation" episodes only days from it on. All randomness comes from one numpy
Generator seeded by `seed`.

    env = TradingEnv(n_envs=4, window=10, n_features=8, episode_length=64, split="train", seed=0)
    obs = env.reset()                                  # (n_envs, obs_dim) float32
    obs, reward, done, info = env.step(actions)        # actions: (n_envs,) ints in {0, 1, 2}
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from foxlib.data.market import SERIES, market_features

N_ACTIONS = 3
POSITIONS = np.array([-1.0, 0.0, 1.0])
"""Position taken by each action: 0 short, 1 flat, 2 long."""
REWARD_SCALE = 100.0
SPLITS = ("train", "evaluation")


def _split_days(split: str, window: int, n_features: int) -> tuple[int, int]:
    """(first, end): the days t of `split` whose observation window and next-day return stay inside it."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    features = market_features(n_features)
    if split == "train":
        return window - 1, features.train_end - 1
    return features.train_end + window - 1, features.next_return.shape[1] - 1


class TradingEnv:
    """`n_envs` independent trading episodes stepped together (see the module docstring)."""

    def __init__(self, n_envs: int = 1, window: int = 10, n_features: int = 8, episode_length: int = 64,
                 split: str = "train", seed: int = 0, cost: float = 1e-4):
        first, end = _split_days(split, window, n_features)
        if n_envs < 1 or window < 1 or episode_length < 1:
            raise ValueError("n_envs, window and episode_length must be at least 1")
        features = market_features(n_features)
        self.n_envs, self.window, self.episode_length, self.cost = n_envs, window, episode_length, cost
        self.obs_dim = window * n_features
        self._observed = features.observed                                  # (S, N, F) float32
        self._returns = features.next_return                                # (S, N) float64
        # an episode starting at t0 is rewarded with the returns of days t0 .. t0+L-1, the last ending on t0+L
        self.first_start, self.last_start = first, end - episode_length
        if self.last_start < first:
            raise ValueError(f"no {split} episodes of length {episode_length} with window {window}")
        self._rng = np.random.default_rng(seed)
        self._series = np.zeros(n_envs, dtype=np.int64)
        self._day = np.zeros(n_envs, dtype=np.int64)
        self._step = np.zeros(n_envs, dtype=np.int64)
        self._position = np.zeros(n_envs)
        self._episode_return = np.zeros(n_envs)
        self._started = False

    def _start(self, envs: np.ndarray) -> None:
        """Fresh episodes (random index, random start day, flat) in sub-environments `envs`."""
        n = len(envs)
        self._series[envs] = self._rng.integers(0, len(SERIES), size=n)
        self._day[envs] = self._rng.integers(self.first_start, self.last_start + 1, size=n)
        self._step[envs] = 0
        self._position[envs] = 0.0
        self._episode_return[envs] = 0.0

    def _observe(self, series: np.ndarray, day: np.ndarray) -> np.ndarray:
        days = day[:, None] + np.arange(1 - self.window, 1)[None, :]       # (n, window)
        return self._observed[series[:, None], days].reshape(len(day), self.obs_dim)

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Start every sub-environment afresh; re-seed first when `seed` is given."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._start(np.arange(self.n_envs))
        self._started = True
        return self._observe(self._series, self._day)

    def step(self, actions) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
        """Apply `actions` (n_envs,) in {0, 1, 2}; returns obs, reward (float32), done (bool), info.

        info: "position" and "log_return" (the unscaled return) behind each reward, "day" and "series" it was
        earned on, "final_obs" (meaningful where done) and "episode_return" (the summed reward of episodes
        that ended now, NaN elsewhere)."""
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
    """Mean reward per day of a deterministic `policy` (obs (n, window * n_features) -> actions (n,)) traded
    on every day of a split that episodes may touch, both indices, each starting flat: a noise-free yardstick."""
    first, end = _split_days(split, window, n_features)
    features = market_features(n_features)
    days = np.arange(first, end)
    idx = days[:, None] + np.arange(1 - window, 1)[None, :]
    rewards = []
    for s in range(len(SERIES)):
        obs = features.observed[s][idx].reshape(len(days), window * n_features)
        position = POSITIONS[np.asarray(policy(obs)).astype(np.int64)]
        turnover = np.abs(np.diff(position, prepend=0.0))
        rewards.append(REWARD_SCALE * (position * features.next_return[s, days] - cost * turnover))
    return float(np.concatenate(rewards).mean())


def greedy_policy(model: torch.nn.Module, device: str | torch.device):
    """numpy obs -> the argmax of `model`'s output (Q-values or logits), for backtest."""
    def act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return model(torch.as_tensor(obs, device=device)).float().argmax(dim=1).cpu().numpy()
    return act


@dataclass(frozen=True)
class EnvConfig:
    """The environment an agent trains in: the first fields of every agent's config (dqn, ppo)."""
    window: int = 10  # days of market features in one observation
    n_features: int = 8  # market features per day (the first n of foxlib.data.market's feature library)
    episode_length: int = 64  # trading days per episode
    cost: float = 1e-4  # transaction cost per unit of turnover (1e-4 = 1 basis point)

    @property
    def obs_dim(self) -> int:
        return self.window * self.n_features

    def env(self, n_envs: int, seed: int, split: str = "train") -> TradingEnv:
        return TradingEnv(n_envs=n_envs, window=self.window, n_features=self.n_features,
                          episode_length=self.episode_length, split=split, seed=seed, cost=self.cost)

    def objective(self, model: torch.nn.Module, device: str | torch.device) -> float:
        """Mean reward per day (percent) of `model`'s greedy policy over every train-split day of both indices
        (backtest); higher is better. In sample: it shows that the agent learns what its training data rewards
        (chiefly the S&P 500's short-term reversal in 2000-2014), not that it would trade well after 2015."""
        return backtest(greedy_policy(model, device), self.window, self.n_features, "train", self.cost)
