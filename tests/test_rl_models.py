"""DQN and PPO cards: shapes, target network, GAE, clipping, precision, buffer bytes, learning."""
import dataclasses

import numpy as np
import pytest
import torch

from foxlib.memory.step import TrainingStep
from foxlib.models import dqn, ppo
from foxlib.models.card import seeded
from tests.conftest import recorded_training_steps

SMALL_DQN = dqn.PRESETS["small"]
SMALL_PPO = ppo.PRESETS["small"]


@pytest.fixture(scope="module")
def dqn_batch():
    return dqn.example_batch(SMALL_DQN, "cpu", seed=0)


@pytest.fixture(scope="module")
def ppo_batch():
    return ppo.example_batch(SMALL_PPO, "cpu", seed=0)


def n_params(module):
    return sum(p.numel() for p in module.parameters())


# ---------------------------------------------------------------- DQN

def test_dqn_shapes_and_parameter_count():
    cfg = SMALL_DQN
    model = dqn.build(cfg)
    q = model(torch.zeros(5, cfg.obs_dim))
    assert q.shape == (5, 3)
    d = cfg.obs_dim
    online = d * 120 + 120 + 120 * 84 + 84 + 84 * 3 + 3
    assert n_params(model.q_network) == online == n_params(model.target_network)
    assert n_params(model) == 2 * online
    assert not any(p.requires_grad for p in model.target_network.parameters())
    for t, o in zip(model.target_network.parameters(), model.q_network.parameters()):
        assert torch.equal(t, o)


def test_dqn_optimizer_leaves_the_target_alone(dqn_batch):
    torch.manual_seed(0)
    model = dqn.build(SMALL_DQN)
    target = [p.clone() for p in model.target_network.parameters()]
    online = [p.clone() for p in model.q_network.parameters()]
    # the profiler's way: Adam over all parameters
    step = TrainingStep(model, dqn_batch, dqn.loss, torch.optim.Adam(model.parameters(), lr=1e-2))
    for _ in range(3):
        step()
    assert all(p.grad is None for p in model.target_network.parameters())
    assert all(torch.equal(a, b) for a, b in zip(target, model.target_network.parameters()))
    assert not any(torch.equal(a, b) for a, b in zip(online, model.q_network.parameters()))
    model.sync_target()
    assert all(torch.equal(a, b) for a, b in zip(model.q_network.parameters(), model.target_network.parameters()))


def test_dqn_loss_is_the_td_loss_on_a_reproducible_minibatch(dqn_batch):
    torch.manual_seed(0)
    model = dqn.build(SMALL_DQN)
    assert dqn.loss(model, dqn_batch).item() == dqn.loss(model, dqn_batch).item()
    rows = np.random.default_rng(dqn_batch.sample_seed).integers(0, SMALL_DQN.buffer_size, SMALL_DQN.batch_size)
    r = dqn_batch.replay
    obs, nxt = torch.as_tensor(r.observations[rows]), torch.as_tensor(r.next_observations[rows])
    with torch.no_grad():
        y = torch.as_tensor(r.rewards[rows]) + 0.99 * model.target_network(nxt).max(1).values * \
            (1 - torch.as_tensor(r.dones[rows]))
        q = model.q_network(obs)[torch.arange(len(rows)), torch.as_tensor(r.actions[rows])]
        expected = torch.nn.functional.smooth_l1_loss(q, y)
    assert dqn.loss(model, dqn_batch).item() == pytest.approx(expected.item(), rel=1e-6)
    assert r.dones.sum() > 0  # episodes ended inside the buffer (done rows are not bootstrapped)


def dqn_transition_bytes(obs_dim: int) -> int:
    """A replay transition, by hand: obs and next_obs float32; action int64; reward and done float32."""
    return 4 * obs_dim + 4 * obs_dim + 8 + 4 + 4


def ppo_transition_bytes(obs_dim: int) -> int:
    """A rollout transition, by hand: obs float32; action int64; logprob, reward, done, value, advantage and
    return float32."""
    return 4 * obs_dim + 8 + 6 * 4


def test_dqn_buffer_bytes_by_hand(dqn_batch):
    cfg = SMALL_DQN
    arrays = dqn.buffers(dqn_batch)
    assert all(isinstance(a, np.ndarray) for a in arrays.values())  # host RAM by default
    per_transition = dqn_transition_bytes(cfg.obs_dim)
    assert sum(a.nbytes for a in arrays.values()) == cfg.buffer_size * per_transition
    on_device = dqn.example_batch(dataclasses.replace(cfg, buffer_size=64, batch_size=8, buffer_device="device"), "cpu")
    tensors = dqn.buffers(on_device)
    assert all(isinstance(t, torch.Tensor) for t in tensors.values())
    assert sum(t.nbytes for t in tensors.values()) == 64 * per_transition


def test_dqn_replay_wraps_around():
    buffer = dqn.ReplayBuffer(5, 2)
    for i in range(7):
        buffer.add(np.full((1, 2), i), np.full((1, 2), i + 1), np.array([i % 3]), np.array([i]), np.array([0.0]))
    assert len(buffer) == 5 and buffer.pos == 2
    np.testing.assert_array_equal(buffer.rewards, [5, 6, 2, 3, 4])


# ---------------------------------------------------------------- PPO

def test_ppo_shapes_and_parameter_count(ppo_batch):
    cfg = SMALL_PPO
    agent = ppo.build(cfg)
    x = torch.zeros(5, cfg.obs_dim)
    action, logprob, entropy, value = agent.get_action_and_value(x)
    assert action.shape == logprob.shape == entropy.shape == value.shape == (5,)
    assert agent(x).shape == (5, 3)
    d, h = cfg.obs_dim, cfg.hidden
    trunk = d * h + h + h * h + h
    assert n_params(agent.actor) == trunk + h * 3 + 3 and n_params(agent.critic) == trunk + h + 1
    r = ppo_batch.rollout
    assert r.obs.shape == (cfg.n_steps, cfg.n_envs, d)
    for name in ppo.RolloutBuffer.FIELDS[1:]:
        assert getattr(r, name).shape == (cfg.n_steps, cfg.n_envs)
    assert r.next_done.all()  # 64-step rollouts of 64-day episodes: every episode ends with it
    assert cfg.rollout_size == 4 * cfg.batch_size  # 4 minibatches per epoch


def test_ppo_rollout_comes_from_the_initial_policy(ppo_batch):
    """A model built like example_batch's collector reproduces the stored log-probs (ratio 1)."""
    agent = seeded(ppo.build, SMALL_PPO, 0, torch.device("cpu"))
    r = ppo_batch.rollout
    with torch.no_grad():
        _, logprob, _, value = agent.get_action_and_value(r.flat("obs"), r.flat("actions"))
    torch.testing.assert_close(logprob, r.flat("logprobs"))
    torch.testing.assert_close(value, r.flat("values"))
    torch.testing.assert_close(r.returns, r.advantages + r.values)


def test_gae_three_steps_by_hand():
    """gamma 0.9, lambda 0.8; an episode ends after step 1 (dones[2] = 1: obs 2 starts a new one)."""
    rewards = torch.tensor([[1.0], [2.0], [3.0]], dtype=torch.float64)
    values = torch.tensor([[0.5], [1.0], [1.5]], dtype=torch.float64)
    dones = torch.tensor([[0.0], [0.0], [1.0]], dtype=torch.float64)
    adv, ret = ppo.compute_gae(rewards, values, dones, torch.tensor([2.0], dtype=torch.float64),
                               torch.tensor([0.0], dtype=torch.float64), gamma=0.9, gae_lambda=0.8)
    a2 = 3.0 + 0.9 * 2.0 - 1.5                # bootstraps from next_value
    a1 = 2.0 - 1.0                            # terminal: no bootstrap, no carry
    a0 = (1.0 + 0.9 * 1.0 - 0.5) + 0.9 * 0.8 * a1
    torch.testing.assert_close(adv[:, 0], torch.tensor([a0, a1, a2], dtype=torch.float64))
    torch.testing.assert_close(ret[:, 0], torch.tensor([a0 + 0.5, a1 + 1.0, a2 + 1.5], dtype=torch.float64))


def test_ppo_clipping_zeroes_the_gradient_outside_the_clip():
    ratio = torch.tensor([1.5, 0.5, 1.5, 0.5, 1.1, 0.9])
    adv = torch.tensor([1.0, -1.0, -1.0, 1.0, 1.0, -1.0])
    new = ratio.log().requires_grad_()
    ppo.clipped_surrogate(new, torch.zeros(6), adv, clip_coef=0.2).sum().backward()
    # clipped (ratio beyond 1 +- 0.2 on the side the advantage pushes toward): no gradient
    assert new.grad[0] == 0 and new.grad[1] == 0
    # pessimistic side (moving away) and inside the clip range: d(-A r)/d log r = -A r
    torch.testing.assert_close(new.grad[2:], -adv[2:] * ratio[2:])


def test_ppo_loss_reproducible_and_buffers_by_hand(ppo_batch):
    torch.manual_seed(0)
    agent = ppo.build(SMALL_PPO)
    assert ppo.loss(agent, ppo_batch).item() == ppo.loss(agent, ppo_batch).item()
    tensors = ppo.buffers(ppo_batch)
    assert set(tensors) == {"obs", "actions", "logprobs", "rewards", "dones", "values", "advantages", "returns"}
    assert sum(t.nbytes for t in tensors.values()) == SMALL_PPO.rollout_size * ppo_transition_bytes(SMALL_PPO.obs_dim)


# ---------------------------------------------------------------- both

CASES = [(dqn, SMALL_DQN), (ppo, SMALL_PPO)]


@pytest.mark.parametrize("module,cfg", CASES, ids=["dqn", "ppo"])
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_loss_finite_under_autocast(module, cfg, precision):
    cfg = dataclasses.replace(cfg, batch_size=8)  # a smaller batch: the loss is what is checked
    batch = module.example_batch(dataclasses.replace(cfg, **({"buffer_size": 64} if module is dqn else {})), "cpu")
    torch.manual_seed(0)
    model = module.build(cfg)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    ctx = torch.autocast("cpu", dtype=dtype) if dtype else torch.autocast("cpu", enabled=False)
    with ctx:
        value = module.loss(model, batch)
    assert value.dtype == torch.float32 and value.dim() == 0 and torch.isfinite(value)
    value.backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


def test_unknown_preset_and_fields():
    for card in (dqn.CARD, ppo.CARD):
        with pytest.raises(ValueError, match="valid presets"):
            card.preset("huge")
        assert card.config("small", batch_size=8).batch_size == 8
    with pytest.raises(ValueError):
        dqn.DQNConfig(buffer_device="gpu")
    with pytest.raises(ValueError):
        ppo.PPOConfig(batch_size=10_000)


def test_seed_presets_land_near_the_seed_team_figures():
    """Training bytes of the seed presets, by formula: 6 MB for DQN, 145 MB for PPO (MB = 1e6 B)."""
    c = dqn.PRESETS["seed"]
    p = n_params(dqn.build(c).q_network)
    dqn_bytes = 16 * p + 4 * p + c.buffer_size * dqn_transition_bytes(c.obs_dim)
    assert 5.0e6 < dqn_bytes < 7.0e6
    c = ppo.PRESETS["seed"]
    p = n_params(ppo.build(c))
    minibatch_obs = c.batch_size * c.obs_dim * 4  # saved for backward by the first layers
    ppo_bytes = 16 * p + c.rollout_size * ppo_transition_bytes(c.obs_dim) + minibatch_obs
    assert 125e6 < ppo_bytes < 165e6
    assert c.buffer_device == "device" and dqn.PRESETS["seed"].buffer_device == "host"


def test_dqn_training_improves_on_a_fixed_seed():
    history = dqn.train(SMALL_DQN, steps=2000, seed=0)
    print("dqn objective history:", np.round(history, 4).tolist())
    assert len(history) == 5 and all(np.isfinite(history))
    # greedy in-sample mean reward per day: from about 0 (an untrained network) to clearly positive
    assert history[-1] > history[0] + 0.04
    assert min(history[2:]) > history[0] + 0.02


@pytest.mark.parametrize("module,cfg,steps,updates,evaluations", [
    # updates at the even environment steps after learning_starts: 10, 12, 14, 16, 18
    (dqn, dataclasses.replace(SMALL_DQN, learning_starts=8), 20, 5, 1),
    # one rollout of 1,024 transitions: 4 epochs x 4 minibatches of 256
    (ppo, SMALL_PPO, SMALL_PPO.rollout_size, 16, 2)])
def test_training_runs_the_one_training_step(monkeypatch, module, cfg, steps, updates, evaluations):
    """train() makes one TrainingStep (foxlib.memory.step), fp32, over the trained parameters, clipped as the
    config says (DQN: not at all), and runs every update through it."""
    made = recorded_training_steps(monkeypatch, module)
    history = module.train(cfg, steps=steps, seed=0)
    assert len(history) == evaluations and len(made) == 1
    step = made[0]
    assert step.precision == "fp32" and step.scaler is None and step.clip == getattr(cfg, "max_grad_norm", None)
    trained = step.model.q_network if module is dqn else step.model
    assert [id(p) for g in step.optimizer.param_groups for p in g["params"]] == [id(p) for p in trained.parameters()]
    assert len(step.losses) == updates and all(np.isfinite(step.losses))


def test_ppo_training_improves_on_a_fixed_seed():
    history = ppo.train(SMALL_PPO, steps=8 * SMALL_PPO.rollout_size, seed=0)
    print("ppo objective history:", np.round(history, 4).tolist())
    assert len(history) == 9 and all(np.isfinite(history))
    assert history[-1] > history[0] + 0.04
    assert min(history[3:]) > history[0] + 0.02
