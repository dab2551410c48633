"""The trading environment: shapes, rewards by hand, auto-reset, determinism, the time split."""
import numpy as np
import pytest

from foxlib.data.market import market_features
from foxlib.data.trading_env import POSITIONS, REWARD_SCALE, TradingEnv, backtest

WINDOW, N_FEATURES, LENGTH = 5, 4, 8


def make(split="train", seed=0, n_envs=3, **kw):
    return TradingEnv(n_envs=n_envs, window=WINDOW, n_features=N_FEATURES, episode_length=LENGTH,
                      split=split, seed=seed, **kw)


def window_of(series, day):
    f = market_features(N_FEATURES)
    return f.observed[series, day - WINDOW + 1: day + 1].reshape(-1)


def test_shapes_and_types():
    env = make()
    obs = env.reset()
    assert env.obs_dim == WINDOW * N_FEATURES
    assert obs.shape == (3, WINDOW * N_FEATURES) and obs.dtype == np.float32
    obs, reward, done, info = env.step(np.array([0, 1, 2]))
    assert obs.shape == (3, env.obs_dim) and obs.dtype == np.float32
    assert reward.shape == (3,) and reward.dtype == np.float32
    assert done.shape == (3,) and done.dtype == bool
    assert info["final_obs"].shape == obs.shape
    np.testing.assert_array_equal(info["position"], [-1.0, 0.0, 1.0])


def test_invalid_use():
    with pytest.raises(ValueError, match="valid splits"):
        make(split="validation")
    env = make()
    with pytest.raises(RuntimeError):
        env.step(np.zeros(3, dtype=int))
    env.reset()
    with pytest.raises(ValueError):
        env.step(np.array([0, 1, 3]))


def test_observations_and_rewards_by_hand():
    """obs = the last WINDOW days of the index's features; reward = 100 (pos r - cost |dpos|)."""
    f = market_features(N_FEATURES)
    cost = 1e-4
    env = make(n_envs=2, cost=cost)
    obs = env.reset()
    actions = [(2, 0), (2, 1), (0, 1), (1, 2), (0, 0)]
    previous, last_day = np.zeros(2), None
    for a in actions:
        obs_next, reward, done, info = env.step(np.array(a))
        s, d = info["series"], info["day"]
        for e in range(2):
            np.testing.assert_array_equal(obs[e], window_of(s[e], d[e]))
            position = [-1.0, 0.0, 1.0][a[e]]
            r = f.next_return[s[e], d[e]]
            expected = 100.0 * (position * r - cost * abs(position - previous[e]))
            assert reward[e] == pytest.approx(expected, rel=1e-6, abs=1e-7)
            assert info["log_return"][e] == r
            previous[e] = position
        if last_day is not None:
            np.testing.assert_array_equal(d, last_day + 1)
        last_day = d
        assert not done.any()
        obs = obs_next
    assert REWARD_SCALE == 100.0
    np.testing.assert_array_equal(POSITIONS, [-1.0, 0.0, 1.0])


def test_episode_end_and_auto_reset():
    env = make(n_envs=4)
    env.reset()
    for t in range(LENGTH):
        obs, reward, done, info = env.step(np.full(4, 2))
        if t < LENGTH - 1:
            assert not done.any()
    assert done.all()
    # the final observation is the window ending the day after the last rewarded day
    for e in range(4):
        np.testing.assert_array_equal(info["final_obs"][e], window_of(info["series"][e], info["day"][e] + 1))
    assert np.isfinite(info["episode_return"]).all()
    # the next step starts fresh episodes from a flat position: opening a long pays the cost
    obs2, reward2, done2, info2 = env.step(np.full(4, 1))
    np.testing.assert_array_equal(reward2, 0.0)  # flat from flat: no return, no cost
    assert not done2.any()
    assert np.isnan(info2["episode_return"]).all()


def test_deterministic_for_a_seed():
    def run(seed):
        env, rng = make(seed=seed), np.random.default_rng(123)
        out = [env.reset()]
        for _ in range(3 * LENGTH):
            obs, reward, done, _ = env.step(rng.integers(0, 3, size=3))
            out += [obs, reward, done]
        return out
    a, b, c = run(7), run(7), run(8)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert any(not np.array_equal(x, y) for x, y in zip(a, c))
    env = make(seed=7)
    first = env.reset()
    env.step(np.zeros(3, dtype=int))
    np.testing.assert_array_equal(env.reset(seed=7), first)


@pytest.mark.parametrize("split", ["train", "evaluation"])
def test_episodes_stay_in_their_split(split):
    """Every day an episode touches (observation windows, the day its returns end on, its
    final observation) lies before train_end for "train" and on or after it for "evaluation"."""
    f = market_features(N_FEATURES)
    te, n_days = f.train_end, len(f.dates)
    env = make(split=split, n_envs=64, seed=1)
    env.reset()
    rng = np.random.default_rng(0)
    first_touched, last_touched = [], []
    for _ in range(10 * LENGTH):
        obs, reward, done, info = env.step(rng.integers(0, 3, size=64))
        first_touched.append(info["day"] - WINDOW + 1)
        last_touched.append(info["day"] + 1)  # the return ends there; the final obs ends there too
        assert np.isfinite(reward).all()
    first_touched, last_touched = np.concatenate(first_touched), np.concatenate(last_touched)
    if split == "train":
        assert first_touched.min() >= 0 and last_touched.max() <= te - 1
    else:
        assert first_touched.min() >= te and last_touched.max() <= n_days - 1
    # the random starts cover the split: both ends of the allowed range are reachable
    assert env.first_start == (WINDOW - 1 if split == "train" else te + WINDOW - 1)
    assert env.last_start + LENGTH == (te - 1 if split == "train" else n_days - 1)


def test_backtest_by_hand():
    f = market_features(N_FEATURES)
    te = f.train_end
    flat = backtest(lambda obs: np.ones(len(obs), dtype=int), WINDOW, N_FEATURES, "train")
    assert flat == 0.0
    long = backtest(lambda obs: np.full(len(obs), 2), WINDOW, N_FEATURES, "evaluation", cost=1e-4)
    days = np.arange(te + WINDOW - 1, len(f.dates) - 1)
    rewards = 100.0 * f.next_return[:, days]
    rewards[:, 0] -= 100.0 * 1e-4  # opening the position, once per index
    assert long == pytest.approx(rewards.mean(), rel=1e-12)
