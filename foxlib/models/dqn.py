"""DQN (Mnih et al., 2015) on the trading environment, in the style of CleanRL's dqn.py.

A Q-network obs -> 120 -> 84 -> 3 (ReLU) scores short / flat / long; a target copy of it,
synced every `target_network_frequency` steps, gives the bootstrapped TD target. Transitions
go into a replay buffer (CleanRL keeps it in host RAM as numpy arrays; keeping it on the
device is a choice that costs accelerator memory: `buffer_device`).

What counts for memory is the buffer, not the network: the `seed` preset's replay buffer is
sized so that the whole training footprint lands near the seed team's 6 MB (see PRESETS).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from foxlib.models.card import ModelCard
from foxlib.data.trading_env import N_ACTIONS, TradingEnv, backtest

BUFFER_DEVICES = ("host", "device")
TD_LOSSES = ("huber", "mse")


@dataclass(frozen=True)
class DQNConfig:
    window: int = 10
    """days of market features in one observation"""
    n_features: int = 8
    """market features per day (the first n of foxlib.data.market's feature library)"""
    episode_length: int = 64
    """trading days per episode"""
    cost: float = 1e-4
    """transaction cost per unit of turnover (1e-4 = 1 basis point)"""
    hidden1: int = 120
    """width of the Q-network's first hidden layer (CleanRL: 120)"""
    hidden2: int = 84
    """width of the Q-network's second hidden layer (CleanRL: 84)"""
    n_envs: int = 1
    """parallel environments (CleanRL: 1)"""
    buffer_size: int = 10_000
    """replay buffer capacity in transitions (CleanRL: 10,000)"""
    buffer_device: str = "host"
    """where the replay buffer lives: "host" (numpy, as CleanRL) or "device" (torch tensors)"""
    batch_size: int = 128
    """transitions per gradient step (CleanRL: 128)"""
    learning_rate: float = 2.5e-4
    """Adam learning rate (CleanRL: 2.5e-4)"""
    gamma: float = 0.99
    """discount factor"""
    tau: float = 1.0
    """target network update rate (1.0 = hard copy)"""
    target_network_frequency: int = 500
    """environment steps between target network updates (CleanRL: 500)"""
    start_e: float = 1.0
    """initial exploration epsilon"""
    end_e: float = 0.05
    """final exploration epsilon"""
    exploration_fraction: float = 0.5
    """fraction of the run over which epsilon falls linearly from start_e to end_e"""
    learning_starts: int = 10_000
    """environment steps of pure collection before learning starts (CleanRL: 10,000)"""
    train_frequency: int = 10
    """environment steps between gradient steps (CleanRL: 10)"""
    td_loss: str = "huber"
    """"huber" (smooth L1, the Nature DQN's error clipping; daily returns are heavy-tailed) or
    "mse" (CleanRL's dqn.py)"""
    eval_every: int = 500
    """environment steps between two points of train()'s objective history"""

    def __post_init__(self):
        if self.buffer_device not in BUFFER_DEVICES:
            raise ValueError(f"unknown buffer_device {self.buffer_device!r}; valid: {', '.join(BUFFER_DEVICES)}")
        if self.td_loss not in TD_LOSSES:
            raise ValueError(f"unknown td_loss {self.td_loss!r}; valid: {', '.join(TD_LOSSES)}")
        if self.batch_size < 1 or self.buffer_size < self.batch_size:
            raise ValueError(f"need 1 <= batch_size <= buffer_size, got {self.batch_size}, {self.buffer_size}")

    @property
    def obs_dim(self) -> int:
        """Observation width: window * n_features (filled in from the other fields)."""
        return self.window * self.n_features


class QNetwork(nn.Module):
    """obs -> hidden1 -> hidden2 -> one Q-value per action, ReLU (CleanRL's QNetwork)."""

    def __init__(self, obs_dim: int, hidden1: int = 120, hidden2: int = 84, n_actions: int = N_ACTIONS):
        super().__init__()
        self.network = nn.Sequential(
            nn.Linear(obs_dim, hidden1), nn.ReLU(),
            nn.Linear(hidden1, hidden2), nn.ReLU(),
            nn.Linear(hidden2, n_actions),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)


class DQN(nn.Module):
    """The online Q-network and its target copy. Only the online one is trained: the target's
    parameters have requires_grad False, get no gradient and so are never moved by an optimizer
    (they still count as parameters in memory)."""

    def __init__(self, cfg: DQNConfig):
        super().__init__()
        self.q_network = QNetwork(cfg.obs_dim, cfg.hidden1, cfg.hidden2)
        self.target_network = QNetwork(cfg.obs_dim, cfg.hidden1, cfg.hidden2)
        self.target_network.load_state_dict(self.q_network.state_dict())
        self.target_network.requires_grad_(False)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.q_network(obs)

    @torch.no_grad()
    def sync_target(self, tau: float = 1.0) -> None:
        """target <- tau * online + (1 - tau) * target."""
        for t, q in zip(self.target_network.parameters(), self.q_network.parameters()):
            t.copy_(tau * q + (1.0 - tau) * t)


def build(cfg: DQNConfig) -> DQN:
    return DQN(cfg)


class ReplayBuffer:
    """Circular replay storage of (obs, next_obs, action, reward, done), one row per transition.

    Layout (as CleanRL's / Stable-Baselines3's ReplayBuffer without memory optimisation):
    observations and next_observations float32 (capacity, obs_dim), actions int64, rewards and
    dones float32 (capacity,): bytes_per_transition = 2 * 4 * obs_dim + 8 + 4 + 4.
    on: "host" keeps numpy arrays in host RAM; a torch device keeps tensors there.
    """

    FIELDS = ("observations", "next_observations", "actions", "rewards", "dones")

    def __init__(self, capacity: int, obs_dim: int, on: str | torch.device = "host"):
        self.capacity, self.obs_dim = capacity, obs_dim
        self.on_host = isinstance(on, str) and on == "host"
        shapes = {"observations": ((capacity, obs_dim), "float32"),
                  "next_observations": ((capacity, obs_dim), "float32"),
                  "actions": ((capacity,), "int64"),
                  "rewards": ((capacity,), "float32"),
                  "dones": ((capacity,), "float32")}
        for name, (shape, dtype) in shapes.items():
            if self.on_host:
                setattr(self, name, np.zeros(shape, dtype=dtype))
            else:
                setattr(self, name, torch.zeros(shape, dtype=getattr(torch, dtype), device=on))
        self.pos, self.full = 0, False

    @staticmethod
    def bytes_per_transition(obs_dim: int) -> int:
        return 2 * 4 * obs_dim + 8 + 4 + 4

    @property
    def nbytes(self) -> int:
        return self.capacity * self.bytes_per_transition(self.obs_dim)

    def __len__(self) -> int:
        return self.capacity if self.full else self.pos

    def add(self, obs, next_obs, actions, rewards, dones) -> None:
        """Append a batch of transitions (numpy, first axis = environments), overwriting the oldest."""
        n = len(actions)
        rows = (self.pos + np.arange(n)) % self.capacity
        values = {"observations": obs, "next_observations": next_obs, "actions": actions,
                  "rewards": rewards, "dones": dones}
        for name, value in values.items():
            store = getattr(self, name)
            if self.on_host:
                store[rows] = value
            else:
                store[torch.as_tensor(rows, device=store.device)] = torch.as_tensor(
                    np.asarray(value), dtype=store.dtype).to(store.device)
        self.full = self.full or self.pos + n >= self.capacity
        self.pos = (self.pos + n) % self.capacity

    def get(self, rows: np.ndarray, device: str | torch.device) -> dict[str, torch.Tensor]:
        """The transitions at `rows` as tensors on `device`."""
        if self.on_host:
            return {name: torch.as_tensor(getattr(self, name)[rows]).to(device) for name in self.FIELDS}
        index = torch.as_tensor(rows, device=self.observations.device)
        return {name: getattr(self, name)[index].to(device) for name in self.FIELDS}

    def sample(self, batch_size: int, rng: np.random.Generator, device: str | torch.device) -> dict[str, torch.Tensor]:
        """`batch_size` transitions drawn uniformly (with replacement) by `rng`, on `device`."""
        return self.get(rng.integers(0, len(self), size=batch_size), device)

    def arrays(self) -> dict:
        return {name: getattr(self, name) for name in self.FIELDS}


def _env(cfg: DQNConfig, n_envs: int, split: str, seed: int) -> TradingEnv:
    return TradingEnv(n_envs=n_envs, window=cfg.window, n_features=cfg.n_features,
                      episode_length=cfg.episode_length, split=split, seed=seed, cost=cfg.cost)


def collect_random(cfg: DQNConfig, n: int, on: str | torch.device, split: str = "train", seed: int = 0,
                   n_envs: int = 16) -> ReplayBuffer:
    """A buffer of capacity n filled with n transitions of the uniform random policy."""
    buffer = ReplayBuffer(n, cfg.obs_dim, on)
    env, rng = _env(cfg, n_envs, split, seed), np.random.default_rng(seed)
    obs = env.reset()
    while len(buffer) < n:
        actions = rng.integers(0, N_ACTIONS, size=n_envs)
        next_obs, rewards, dones, info = env.step(actions)
        real_next = np.where(dones[:, None], info["final_obs"], next_obs)
        k = min(n_envs, n - len(buffer))
        buffer.add(obs[:k], real_next[:k], actions[:k], rewards[:k], dones[:k].astype(np.float32))
        obs = next_obs
    return buffer


@dataclass
class DQNBatch:
    """What one profiled DQN step needs: the config and a full replay buffer. `loss` draws its
    minibatch of cfg.batch_size rows with np.random.default_rng(sample_seed): the same rows at
    every call, so repeated steps are identical."""
    cfg: DQNConfig
    replay: ReplayBuffer
    sample_seed: int


def example_batch(cfg: DQNConfig, device: str | torch.device = "cpu", seed: int = 0) -> DQNBatch:
    """A replay buffer of cfg.buffer_size transitions of the random policy on the train split
    (numpy in host RAM, or tensors on `device` when cfg.buffer_device == "device")."""
    on = "host" if cfg.buffer_device == "host" else torch.device(device)
    return DQNBatch(cfg, collect_random(cfg, cfg.buffer_size, on, "train", seed), sample_seed=seed)


def td_loss(model: DQN, data: dict[str, torch.Tensor], cfg: DQNConfig) -> torch.Tensor:
    """TD loss of the online network against r + gamma * max_a' Q_target(s', a') (no bootstrap
    past done); Huber (smooth L1, beta 1) or MSE by cfg.td_loss, computed in float32."""
    with torch.no_grad():
        target_max = model.target_network(data["next_observations"]).float().max(dim=1).values
        td_target = data["rewards"].float() + cfg.gamma * target_max * (1.0 - data["dones"].float())
    old_val = model.q_network(data["observations"]).float().gather(1, data["actions"][:, None]).squeeze(1)
    if cfg.td_loss == "huber":
        return F.smooth_l1_loss(old_val, td_target)
    return F.mse_loss(old_val, td_target)


def loss(model: DQN, batch: DQNBatch) -> torch.Tensor:
    """The TD loss on one minibatch of batch.cfg.batch_size transitions sampled from the replay
    buffer (reproducibly, see DQNBatch) and moved to the model's device."""
    device = next(model.parameters()).device
    data = batch.replay.sample(batch.cfg.batch_size, np.random.default_rng(batch.sample_seed), device)
    return td_loss(model, data, batch.cfg)


def buffers(batch: DQNBatch) -> dict:
    """The replay storage: numpy arrays in host RAM (buffer_device "host", CleanRL's choice) or
    tensors on the device the batch was made for (buffer_device "device")."""
    return batch.replay.arrays()


def linear_schedule(start_e: float, end_e: float, duration: float, t: int) -> float:
    slope = (end_e - start_e) / max(duration, 1.0)
    return max(slope * t + start_e, end_e)


def greedy_policy(model: nn.Module, device: str | torch.device):
    """numpy obs -> greedy actions of `model` (argmax of its output), for trading_env.backtest."""
    def act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return model(torch.as_tensor(obs, device=device)).float().argmax(dim=1).cpu().numpy()
    return act


OBJECTIVE = ("mean reward per day (percent) of the greedy policy over every train-split day of both "
             "indices (trading_env.backtest); higher is better")


def train(cfg: DQNConfig, steps: int, device: str | torch.device = "cpu", seed: int = 0) -> list[float]:
    """A short CleanRL-style DQN run of `steps` environment steps on the train split.

    Returns the objective history (see OBJECTIVE), measured before training and then every
    cfg.eval_every environment steps. Daily index returns are close to unpredictable, so the
    objective is measured on a fixed set of days (no sampling noise), in sample: what it shows
    is that the agent learns what its training data rewards (chiefly the short-term reversal of
    the S&P 500 in 2000-2014), not that it would trade profitably after 2015."""
    device = torch.device(device)
    rng = np.random.default_rng(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = build(cfg).to(device)
    optimizer = torch.optim.Adam(model.q_network.parameters(), lr=cfg.learning_rate)
    replay = ReplayBuffer(cfg.buffer_size, cfg.obs_dim, "host" if cfg.buffer_device == "host" else device)
    env = _env(cfg, cfg.n_envs, "train", seed)

    def objective() -> float:
        return backtest(greedy_policy(model, device), cfg.window, cfg.n_features, "train", cfg.cost)

    history = [objective()]
    obs = env.reset()
    for global_step in range(steps):
        epsilon = linear_schedule(cfg.start_e, cfg.end_e, cfg.exploration_fraction * steps, global_step)
        if rng.random() < epsilon:
            actions = rng.integers(0, N_ACTIONS, size=cfg.n_envs)
        else:
            actions = greedy_policy(model, device)(obs)
        next_obs, rewards, dones, info = env.step(actions)
        real_next = np.where(dones[:, None], info["final_obs"], next_obs)
        replay.add(obs, real_next, actions, rewards, dones.astype(np.float32))
        obs = next_obs
        if global_step > cfg.learning_starts and global_step % cfg.train_frequency == 0:
            data = replay.sample(cfg.batch_size, rng, device)
            loss_value = td_loss(model, data, cfg)
            optimizer.zero_grad()
            loss_value.backward()
            optimizer.step()
        if global_step % cfg.target_network_frequency == 0:
            model.sync_target(cfg.tau)
        if (global_step + 1) % cfg.eval_every == 0:
            history.append(objective())
    return history


# seed: the seed team's nvidia-smi figure for DQN was 6 MB of training memory. A CleanRL-sized
# network on a 10-day x 8-feature observation (obs_dim 80) has 20,139 parameters: 16 B each
# for the online network with Adam + 4 B each for the target copy = 0.40 MB, and a minibatch
# of 128 saves 0.15 MB for backward. The rest is the replay buffer, at 2*4*80 + 16 = 656 B per
# transition: 8,000 transitions = 5.25 MB, 5.80 MB in all (measured with profile_step).
PRESETS = {
    "seed": DQNConfig(buffer_size=8_000),
    # small: a quick CPU run that learns within 2,000 environment steps (tests, notebooks).
    "small": DQNConfig(buffer_size=2_000, learning_starts=500, train_frequency=2,
                       target_network_frequency=250, eval_every=500),
}

CARD = ModelCard(name="dqn", title="DQN (CleanRL-style, trading env)", presets=PRESETS, build=build,
                 example_batch=example_batch, loss=loss, buffers=buffers, train=train)
