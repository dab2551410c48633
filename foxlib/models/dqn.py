"""DQN (Mnih et al., 2015) on the trading environment, in the style of CleanRL's dqn.py.

A Q-network obs -> 120 -> 84 -> 3 (ReLU) scores short / flat / long; a target copy of it, synced every
`target_network_frequency` steps, gives the bootstrapped TD target. Transitions go into a replay buffer
(CleanRL keeps it in host RAM as numpy arrays; on the device it costs accelerator memory: `buffer_device`).
What counts for memory is the buffer, not the network (see PRESETS).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from foxlib.data.trading_env import N_ACTIONS, EnvConfig, greedy_policy
from foxlib.memory.step import TrainingStep
from foxlib.models.card import ModelCard, seeded

BUFFER_DEVICES = ("host", "device")
TD_LOSSES = ("huber", "mse")


@dataclass(frozen=True)
class DQNConfig(EnvConfig):
    hidden1: int = 120  # width of the Q-network's first hidden layer (CleanRL: 120)
    hidden2: int = 84  # width of the Q-network's second hidden layer (CleanRL: 84)
    n_envs: int = 1  # parallel environments (CleanRL: 1)
    buffer_size: int = 10_000  # replay buffer capacity in transitions (CleanRL: 10,000)
    buffer_device: str = "host"  # where the replay buffer lives: "host" (numpy, as CleanRL) or "device" (torch tensors)
    batch_size: int = 128  # transitions per gradient step (CleanRL: 128)
    learning_rate: float = 2.5e-4  # Adam learning rate (CleanRL: 2.5e-4)
    gamma: float = 0.99  # discount factor
    tau: float = 1.0  # target network update rate (1.0 = hard copy)
    target_network_frequency: int = 500  # environment steps between target network updates (CleanRL: 500)
    start_e: float = 1.0  # initial exploration epsilon
    end_e: float = 0.05  # final exploration epsilon
    exploration_fraction: float = 0.5  # fraction of the run over which epsilon falls linearly from start_e to end_e
    learning_starts: int = 10_000  # environment steps of pure collection before learning starts (CleanRL: 10,000)
    train_frequency: int = 10  # environment steps between gradient steps (CleanRL: 10)
    # "huber" (smooth L1, the Nature DQN's error clipping; daily returns are heavy-tailed) or "mse" (CleanRL's)
    td_loss: str = "huber"
    eval_every: int = 500  # environment steps between two points of train()'s objective history

    def __post_init__(self):
        if self.buffer_device not in BUFFER_DEVICES:
            raise ValueError(f"unknown buffer_device {self.buffer_device!r}; valid: {', '.join(BUFFER_DEVICES)}")
        if self.td_loss not in TD_LOSSES:
            raise ValueError(f"unknown td_loss {self.td_loss!r}; valid: {', '.join(TD_LOSSES)}")
        if self.batch_size < 1 or self.buffer_size < self.batch_size:
            raise ValueError(f"need 1 <= batch_size <= buffer_size, got {self.batch_size}, {self.buffer_size}")


class QNetwork(nn.Module):
    """obs -> hidden1 -> hidden2 -> one Q-value per action, ReLU (CleanRL's QNetwork)."""

    def __init__(self, cfg: DQNConfig):
        super().__init__()
        self.network = nn.Sequential(nn.Linear(cfg.obs_dim, cfg.hidden1), nn.ReLU(),
                                     nn.Linear(cfg.hidden1, cfg.hidden2), nn.ReLU(),
                                     nn.Linear(cfg.hidden2, N_ACTIONS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)


class DQN(nn.Module):
    """The online Q-network and its target copy. The target's parameters have requires_grad False: no
    gradient, so no optimizer moves them (they still count as parameters in memory)."""

    def __init__(self, cfg: DQNConfig):
        super().__init__()
        self.q_network = QNetwork(cfg)
        self.target_network = QNetwork(cfg)
        self.target_network.load_state_dict(self.q_network.state_dict())
        self.target_network.requires_grad_(False)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.q_network(obs)

    @torch.no_grad()
    def sync_target(self, tau: float = 1.0) -> None:
        """target <- tau * online + (1 - tau) * target."""
        for t, q in zip(self.target_network.parameters(), self.q_network.parameters()):
            t.copy_(tau * q + (1.0 - tau) * t)


build = DQN  # config -> module


class ReplayBuffer:
    """Circular replay storage, one row per transition, as CleanRL's / Stable-Baselines3's ReplayBuffer without
    memory optimisation: observations and next_observations float32 (capacity, obs_dim), actions int64, rewards
    and dones float32 (capacity,). on: "host" keeps numpy arrays in host RAM, a torch device tensors there."""

    FIELDS = {"observations": "float32", "next_observations": "float32", "actions": "int64",
              "rewards": "float32", "dones": "float32"}

    def __init__(self, capacity: int, obs_dim: int, on: str | torch.device = "host"):
        self.capacity, self.obs_dim = capacity, obs_dim
        self.on_host = isinstance(on, str) and on == "host"
        for name, dtype in self.FIELDS.items():
            shape = (capacity, obs_dim) if name.endswith("observations") else (capacity,)
            setattr(self, name, np.zeros(shape, dtype=dtype) if self.on_host else
                    torch.zeros(shape, dtype=getattr(torch, dtype), device=on))
        self.pos, self.full = 0, False

    def __len__(self) -> int:
        return self.capacity if self.full else self.pos

    def add(self, obs, next_obs, actions, rewards, dones) -> None:
        """Append a batch of transitions (numpy, first axis = environments), overwriting the oldest."""
        n = len(actions)
        rows = (self.pos + np.arange(n)) % self.capacity
        for name, value in zip(self.FIELDS, (obs, next_obs, actions, rewards, dones)):
            store = getattr(self, name)
            if not self.on_host:
                value = torch.as_tensor(np.asarray(value), dtype=store.dtype).to(store.device)
            store[rows] = value
        self.full = self.full or self.pos + n >= self.capacity
        self.pos = (self.pos + n) % self.capacity

    def step(self, env, obs: np.ndarray, actions: np.ndarray, k: int | None = None) -> np.ndarray:
        """Step `env` with `actions` from `obs` and store the first `k` transitions (all: None), the finished
        episode's last observation as next_obs where one ended; the next observations."""
        next_obs, rewards, dones, info = env.step(actions)
        real_next = np.where(dones[:, None], info["final_obs"], next_obs)
        self.add(obs[:k], real_next[:k], actions[:k], rewards[:k], dones[:k].astype(np.float32))
        return next_obs

    def sample(self, batch_size: int, rng: np.random.Generator, device: str | torch.device) -> dict[str, torch.Tensor]:
        """`batch_size` transitions drawn uniformly (with replacement) by `rng`, as tensors on `device`."""
        rows = rng.integers(0, len(self), size=batch_size)
        return {name: torch.as_tensor(getattr(self, name)[rows]).to(device) for name in self.FIELDS}


@dataclass
class DQNBatch:
    """One profiled DQN step's input: the config and a full replay buffer. `loss` draws its minibatch with
    np.random.default_rng(sample_seed): the same rows at every call, so repeated steps are identical."""
    cfg: DQNConfig
    replay: ReplayBuffer
    sample_seed: int


def example_batch(cfg: DQNConfig, device: str | torch.device = "cpu", seed: int = 0) -> DQNBatch:
    """A replay buffer filled with cfg.buffer_size transitions of the uniform random policy on the train split,
    16 environments at a time (numpy in host RAM, or tensors on `device` when cfg.buffer_device == "device")."""
    replay = ReplayBuffer(cfg.buffer_size, cfg.obs_dim, "host" if cfg.buffer_device == "host" else torch.device(device))
    n_envs = 16
    env, rng = cfg.env(n_envs, seed), np.random.default_rng(seed)
    obs = env.reset()
    while len(replay) < cfg.buffer_size:
        obs = replay.step(env, obs, rng.integers(0, N_ACTIONS, size=n_envs), min(n_envs, cfg.buffer_size - len(replay)))
    return DQNBatch(cfg, replay, sample_seed=seed)


def td_loss(model: DQN, data: dict[str, torch.Tensor], cfg: DQNConfig) -> torch.Tensor:
    """TD loss of the online network against r + gamma * max_a' Q_target(s', a') (no bootstrap past done);
    Huber (smooth L1, beta 1) or MSE by cfg.td_loss, in float32."""
    with torch.no_grad():
        target_max = model.target_network(data["next_observations"]).float().max(dim=1).values
        td_target = data["rewards"].float() + cfg.gamma * target_max * (1.0 - data["dones"].float())
    old_val = model.q_network(data["observations"]).float().gather(1, data["actions"][:, None]).squeeze(1)
    return (F.smooth_l1_loss if cfg.td_loss == "huber" else F.mse_loss)(old_val, td_target)


def loss(model: DQN, batch: DQNBatch) -> torch.Tensor:
    """The TD loss on one reproducible minibatch (see DQNBatch), on the model's device."""
    device = next(model.parameters()).device
    data = batch.replay.sample(batch.cfg.batch_size, np.random.default_rng(batch.sample_seed), device)
    return td_loss(model, data, batch.cfg)


def buffers(batch: DQNBatch) -> dict:
    return {name: getattr(batch.replay, name) for name in ReplayBuffer.FIELDS}


def train(cfg: DQNConfig, steps: int, device: str | torch.device = "cpu", seed: int = 0) -> list[float]:
    """A short CleanRL-style run of `steps` environment steps on the train split, each update one TrainingStep
    (foxlib.memory.step) on a fresh minibatch: the objective (EnvConfig.objective) before training and every
    cfg.eval_every steps."""
    device = torch.device(device)
    rng = np.random.default_rng(seed)
    model = seeded(build, cfg, seed, device)
    optimizer = torch.optim.Adam(model.q_network.parameters(), lr=cfg.learning_rate)
    update = TrainingStep(model, None, lambda m, data: td_loss(m, data, cfg), optimizer)
    replay = ReplayBuffer(cfg.buffer_size, cfg.obs_dim, "host" if cfg.buffer_device == "host" else device)
    env = cfg.env(cfg.n_envs, seed)
    history = [cfg.objective(model, device)]
    obs = env.reset()
    for global_step in range(steps):
        slope = (cfg.end_e - cfg.start_e) / max(cfg.exploration_fraction * steps, 1.0)
        if rng.random() < max(slope * global_step + cfg.start_e, cfg.end_e):  # epsilon, falling linearly
            actions = rng.integers(0, N_ACTIONS, size=cfg.n_envs)
        else:
            actions = greedy_policy(model, device)(obs)
        obs = replay.step(env, obs, actions)
        if global_step > cfg.learning_starts and global_step % cfg.train_frequency == 0:
            update(replay.sample(cfg.batch_size, rng, device))
        if global_step % cfg.target_network_frequency == 0:
            model.sync_target(cfg.tau)
        if (global_step + 1) % cfg.eval_every == 0:
            history.append(cfg.objective(model, device))
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
                 example_batch=example_batch, loss=loss, buffers=buffers)
