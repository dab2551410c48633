"""PPO (Schulman et al., 2017) on the trading environment, in the style of CleanRL's ppo.py.

An `Agent` with separate actor and critic MLPs obs -> 64 -> 64 (Tanh, orthogonal init) gives 3 logits (short /
flat / long) and one value. Each iteration collects n_envs x n_steps transitions into a rollout buffer (CleanRL
keeps it on the device), computes GAE advantages, then runs update_epochs epochs of clipped-surrogate updates
over minibatches of batch_size. What counts for memory is the rollout, not the network (see PRESETS).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from foxlib.data.trading_env import N_ACTIONS, EnvConfig
from foxlib.memory.step import TrainingStep
from foxlib.models.card import ModelCard, seeded

BUFFER_DEVICES = ("device", "host")


@dataclass(frozen=True)
class PPOConfig(EnvConfig):
    hidden: int = 64  # width of the actor's and the critic's two hidden layers (CleanRL: 64)
    n_envs: int = 4  # parallel environments (CleanRL: 4)
    n_steps: int = 128  # steps per environment per rollout (CleanRL: 128); the rollout holds n_envs * n_steps
    # transitions per minibatch update, one profiled step (CleanRL derives it: rollout / 4 minibatches by default)
    batch_size: int = 128
    update_epochs: int = 4  # epochs over the rollout per iteration (CleanRL: 4)
    learning_rate: float = 2.5e-4  # Adam learning rate (CleanRL: 2.5e-4)
    anneal_lr: bool = True  # anneal the learning rate linearly to 0 over the run
    gamma: float = 0.99  # discount factor
    gae_lambda: float = 0.95  # lambda of generalised advantage estimation
    norm_adv: bool = True  # normalise advantages within each minibatch
    clip_coef: float = 0.2  # surrogate clipping coefficient
    clip_vloss: bool = True  # clip the value loss as in the PPO reference implementation
    ent_coef: float = 0.01  # entropy bonus coefficient
    vf_coef: float = 0.5  # value loss coefficient
    max_grad_norm: float = 0.5  # gradient clipping norm
    buffer_device: str = "device"  # where the rollout lives: "device" (torch tensors, as CleanRL) or "host" (CPU)
    eval_every: int = 1  # iterations between two points of train()'s objective history

    def __post_init__(self):
        if self.buffer_device not in BUFFER_DEVICES:
            raise ValueError(f"unknown buffer_device {self.buffer_device!r}; valid: {', '.join(BUFFER_DEVICES)}")
        if not 1 <= self.batch_size <= self.n_envs * self.n_steps:
            raise ValueError(f"batch_size must be in 1..n_envs*n_steps={self.n_envs * self.n_steps}, "
                             f"got {self.batch_size}")

    @property
    def rollout_size(self) -> int:
        """Transitions per rollout: n_envs * n_steps (CleanRL's batch_size)."""
        return self.n_envs * self.n_steps


def layer_init(layer: nn.Linear, std: float = math.sqrt(2)) -> nn.Linear:
    """Orthogonal weights with gain `std`, zero bias (CleanRL's layer_init)."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, 0.0)
    return layer


def mlp(obs_dim: int, hidden: int, out: int, std: float) -> nn.Sequential:
    """obs -> hidden -> hidden (Tanh) -> out, orthogonal init with output gain `std`."""
    return nn.Sequential(layer_init(nn.Linear(obs_dim, hidden)), nn.Tanh(),
                         layer_init(nn.Linear(hidden, hidden)), nn.Tanh(),
                         layer_init(nn.Linear(hidden, out), std=std))


class Agent(nn.Module):
    """Separate actor and critic MLPs; output gains 0.01 and 1."""

    def __init__(self, obs_dim: int, hidden: int):
        super().__init__()
        self.critic = mlp(obs_dim, hidden, 1, std=1.0)
        self.actor = mlp(obs_dim, hidden, N_ACTIONS, std=0.01)

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x).float().squeeze(-1)

    def get_action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None,
                             generator: torch.Generator | None = None):
        """(action, log-prob, entropy, value), all float32; samples an action when none is given."""
        logits = self.actor(x).float()
        dist = torch.distributions.Categorical(logits=logits)
        if action is None:
            action = torch.multinomial(dist.probs, 1, generator=generator).squeeze(1)
        return action, dist.log_prob(action), dist.entropy(), self.get_value(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The policy's logits (greedy action = argmax)."""
        return self.actor(x)


def build(cfg: PPOConfig) -> Agent:
    return Agent(cfg.obs_dim, cfg.hidden)


class RolloutBuffer:
    """One rollout, (n_steps, n_envs, ...) torch tensors on one device, CleanRL's layout: obs float32
    (.., obs_dim); actions int64; logprobs, rewards, dones, values, advantages, returns float32. dones[t] is 1
    where obs[t] starts a new episode (CleanRL's convention); next_obs / next_done: the step after the last."""

    FIELDS = ("obs", "actions", "logprobs", "rewards", "dones", "values", "advantages", "returns")

    def __init__(self, n_steps: int, n_envs: int, obs_dim: int, device: str | torch.device = "cpu"):
        z = lambda *shape, dtype=torch.float32: torch.zeros((n_steps, n_envs) + shape, dtype=dtype, device=device)
        self.obs = z(obs_dim)
        self.actions = z(dtype=torch.int64)
        self.logprobs, self.rewards, self.dones = z(), z(), z()
        self.values, self.advantages, self.returns = z(), z(), z()
        self.next_obs = torch.zeros((n_envs, obs_dim), device=device)
        self.next_done = torch.zeros(n_envs, device=device)

    def flat(self, name: str) -> torch.Tensor:
        """A field with steps and environments merged into one axis (a view)."""
        t = getattr(self, name)
        return t.reshape((-1,) + t.shape[2:])


def compute_gae(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, next_value: torch.Tensor,
                next_done: torch.Tensor, gamma: float, gae_lambda: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over (T, n_envs) tensors, CleanRL's convention for dones
    (dones[t] = obs[t] starts a new episode). Returns (advantages, returns = advantages + values)."""
    advantages = torch.zeros_like(rewards)
    last = torch.zeros_like(next_value)
    next_nonterminal = 1.0 - torch.cat([dones[1:], next_done.unsqueeze(0)])  # of step t + 1, per step t
    next_values = torch.cat([values[1:], next_value.unsqueeze(0)])
    for t in reversed(range(rewards.shape[0])):
        delta = rewards[t] + gamma * next_values[t] * next_nonterminal[t] - values[t]
        advantages[t] = last = delta + gamma * gae_lambda * next_nonterminal[t] * last
    return advantages, advantages + values


class Collector:
    """Steps the training environments with the agent's sampled actions into a RolloutBuffer."""

    def __init__(self, cfg: PPOConfig, device: torch.device, seed: int):
        self.cfg, self.device = cfg, device
        self.env = cfg.env(cfg.n_envs, seed)
        self.generator = torch.Generator(device=device).manual_seed(seed)
        self.next_obs = torch.as_tensor(self.env.reset(), device=device)
        self.next_done = torch.zeros(cfg.n_envs, device=device)

    @torch.no_grad()
    def collect(self, agent: Agent, rollout: RolloutBuffer) -> RolloutBuffer:
        cfg, store = self.cfg, rollout.obs.device
        for step in range(cfg.n_steps):
            rollout.obs[step] = self.next_obs.to(store)
            rollout.dones[step] = self.next_done.to(store)
            action, logprob, _, value = agent.get_action_and_value(self.next_obs, generator=self.generator)
            rollout.values[step] = value.to(store)
            rollout.actions[step] = action.to(store)
            rollout.logprobs[step] = logprob.to(store)
            obs, reward, done, _ = self.env.step(action.cpu().numpy())
            rollout.rewards[step] = torch.as_tensor(reward).to(store)
            self.next_obs = torch.as_tensor(obs, device=self.device)
            self.next_done = torch.as_tensor(done, dtype=torch.float32, device=self.device)
        next_value = agent.get_value(self.next_obs).to(store)
        rollout.next_obs.copy_(self.next_obs)
        rollout.next_done.copy_(self.next_done)
        advantages, returns = compute_gae(rollout.rewards, rollout.values, rollout.dones, next_value,
                                          self.next_done.to(store), cfg.gamma, cfg.gae_lambda)
        rollout.advantages.copy_(advantages)
        rollout.returns.copy_(returns)
        return rollout


def clipped_surrogate(newlogprob: torch.Tensor, oldlogprob: torch.Tensor, advantages: torch.Tensor,
                      clip_coef: float) -> torch.Tensor:
    """Per-sample PPO policy loss max(-A r, -A clip(r, 1-c, 1+c)), r = exp(new - old): no gradient where the
    clipped term is the larger (r outside the clip range, on the side the advantage favours)."""
    ratio = (newlogprob - oldlogprob).exp()
    return torch.max(-advantages * ratio, -advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef))


def ppo_loss(agent: Agent, mb: dict[str, torch.Tensor], cfg: PPOConfig) -> torch.Tensor:
    """Policy loss + vf_coef * value loss - ent_coef * entropy on one minibatch, in float32."""
    _, newlogprob, entropy, newvalue = agent.get_action_and_value(mb["obs"], mb["actions"])
    advantages = mb["advantages"]
    if cfg.norm_adv and len(advantages) > 1:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    pg_loss = clipped_surrogate(newlogprob, mb["logprobs"], advantages, cfg.clip_coef).mean()
    v_loss = (newvalue - mb["returns"]) ** 2
    if cfg.clip_vloss:
        v_clipped = mb["values"] + torch.clamp(newvalue - mb["values"], -cfg.clip_coef, cfg.clip_coef)
        v_loss = torch.max(v_loss, (v_clipped - mb["returns"]) ** 2)
    v_loss = 0.5 * v_loss.mean()
    return pg_loss - cfg.ent_coef * entropy.mean() + cfg.vf_coef * v_loss


MINIBATCH_FIELDS = ("obs", "actions", "logprobs", "values", "advantages", "returns")


def minibatch(rollout: RolloutBuffer, rows: torch.Tensor, device: torch.device) -> dict[str, torch.Tensor]:
    index = rows.to(rollout.obs.device)
    return {name: rollout.flat(name)[index].to(device) for name in MINIBATCH_FIELDS}


@dataclass
class PPOBatch:
    """One profiled PPO step's input: the config and a rollout with advantages. `loss` uses the first
    batch_size rows of np.random.default_rng(sample_seed).permutation(rollout_size): the same minibatch at
    every call, so repeated steps are identical."""
    cfg: PPOConfig
    rollout: RolloutBuffer
    sample_seed: int


def example_batch(cfg: PPOConfig, device: str | torch.device = "cpu", seed: int = 0) -> PPOBatch:
    """A rollout of n_envs x n_steps train-split transitions of the initial policy (seeded(build, cfg, seed)),
    with GAE advantages and returns; on `device` when cfg.buffer_device == "device", else in host memory."""
    device = torch.device(device)
    store = device if cfg.buffer_device == "device" else torch.device("cpu")
    agent = seeded(build, cfg, seed, device)
    rollout = RolloutBuffer(cfg.n_steps, cfg.n_envs, cfg.obs_dim, store)
    Collector(cfg, device, seed).collect(agent, rollout)
    return PPOBatch(cfg, rollout, sample_seed=seed)


def loss(model: Agent, batch: PPOBatch) -> torch.Tensor:
    """The clipped PPO objective on one reproducible minibatch (see PPOBatch), on the model's device."""
    device = next(model.parameters()).device
    rows = np.random.default_rng(batch.sample_seed).permutation(batch.cfg.rollout_size)[:batch.cfg.batch_size]
    return ppo_loss(model, minibatch(batch.rollout, torch.as_tensor(rows), device), batch.cfg)


def buffers(batch: PPOBatch) -> dict:
    return {name: getattr(batch.rollout, name) for name in RolloutBuffer.FIELDS}


def train(cfg: PPOConfig, steps: int, device: str | torch.device = "cpu", seed: int = 0) -> list[float]:
    """A short CleanRL-style run of `steps` environment steps (CleanRL's total_timesteps, rounded up to whole
    rollouts) on the train split, each minibatch update one TrainingStep (foxlib.memory.step, gradients clipped to
    cfg.max_grad_norm): the objective (EnvConfig.objective) before training and every cfg.eval_every
    iterations."""
    device = torch.device(device)
    store = device if cfg.buffer_device == "device" else torch.device("cpu")
    agent = seeded(build, cfg, seed, device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=cfg.learning_rate, eps=1e-5)
    update = TrainingStep(agent, None, lambda m, mb: ppo_loss(m, mb, cfg), optimizer, clip=cfg.max_grad_norm)
    rollout = RolloutBuffer(cfg.n_steps, cfg.n_envs, cfg.obs_dim, store)
    collector = Collector(cfg, device, seed)
    rng = np.random.default_rng(seed)
    iterations = max(1, math.ceil(steps / cfg.rollout_size))
    history = [cfg.objective(agent, device)]
    for iteration in range(iterations):
        if cfg.anneal_lr:
            optimizer.param_groups[0]["lr"] = (1.0 - iteration / iterations) * cfg.learning_rate
        collector.collect(agent, rollout)
        for _ in range(cfg.update_epochs):
            order = rng.permutation(cfg.rollout_size)
            for start in range(0, cfg.rollout_size, cfg.batch_size):
                update(minibatch(rollout, torch.as_tensor(order[start:start + cfg.batch_size]), device))
        if (iteration + 1) % cfg.eval_every == 0:
            history.append(cfg.objective(agent, device))
    return history


# seed: the seed team's nvidia-smi figure for PPO was 145 MB of training memory. 8 envs x 2,048
# steps (the top of CleanRL's range) of a 60-day x 28-feature observation (obs_dim 1,680): the
# rollout is 16,384 x (4*1680 + 32) B = 110.6 MB on the device; one minibatch update of 4,096
# rows (4 minibatches) saves its 27.5 MB copy of the observations plus 4.6 MB of hidden
# activations for backward; 223,748 parameters x 16 B = 3.6 MB. 146.3 MB in all (measured with
# profile_step). n_features was the knob: 24 features give 126 MB.
PRESETS = {
    "seed": PPOConfig(window=60, n_features=28, n_envs=8, n_steps=2048, batch_size=4096),
    # small: a quick CPU run that learns within ~8 rollouts. Larger rollouts (16 envs x 64
    # steps) and gamma 0.5 make it robust: actions do not move the market, only the turnover
    # cost links one day to the next, so a short horizon loses little and cuts the variance of
    # the advantages (with CleanRL's 4 x 128 and gamma 0.99 some seeds do not improve).
    "small": PPOConfig(n_envs=16, n_steps=64, batch_size=256, learning_rate=1e-3, gamma=0.5),
}

CARD = ModelCard(name="ppo", title="PPO (CleanRL-style, trading env)", presets=PRESETS, build=build,
                 example_batch=example_batch, loss=loss, buffers=buffers)
