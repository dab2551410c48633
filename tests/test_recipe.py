"""The one training-step recipe: every site builds Adam at the card's learning rate, the same seed
gives the same weights and batch, and the step trains."""
import dataclasses

import pytest
import torch

from foxlib.memory import accounting
from foxlib.models import MODELS
from foxlib.harness.recipe import StepRecipe, build_step, optimizer_for
from foxlib.harness.step_options import StepOptions

CPU = torch.device("cpu")


def _small(model):
    """The small preset; the RL agents at a learning rate no copy could fall back to (1e-3 was the old default)."""
    cfg = MODELS[model].preset("small")
    if model in ("dqn", "ppo"):
        cfg = dataclasses.replace(cfg, learning_rate=7e-4)
    return dataclasses.replace(cfg, batch_size=4) if model in ("tft", "dqn") else cfg


@pytest.fixture
def adam_rates(monkeypatch):
    """The learning rate of every torch.optim.Adam built while the test runs."""
    rates = []
    real = torch.optim.Adam

    class Spy(real):
        def __init__(self, params, lr=1e-3, **kw):
            rates.append(lr)
            super().__init__(params, lr=lr, **kw)
    monkeypatch.setattr(torch.optim, "Adam", Spy)
    return rates


@pytest.mark.parametrize("model", ["dqn", "ppo"])
def test_measure_model_and_second_opinion_use_the_cards_learning_rate(model, adam_rates):
    from foxlib.harness.measure_step import measure_model, second_opinion
    cfg = _small(model)
    assert cfg.learning_rate != 1e-3  # the default the old copies fell back to
    out = measure_model(model, cfg, CPU, predict=False)
    assert adam_rates == [cfg.learning_rate] and out["learning_rate"] == cfg.learning_rate
    second_opinion(model, cfg, CPU)
    assert adam_rates == [cfg.learning_rate] * 2


def test_timed_and_ensemble_steps_use_the_cards_learning_rate(adam_rates):
    from foxlib.waves.wave_8_13 import members
    cfg = _small("dqn")
    build_step(StepRecipe("dqn", cfg), CPU)  # the step wave 8.11 times
    member = members.Member("dqn", cfg, "fp32")
    members.load_member(member, CPU, seed=0)
    assert adam_rates == [cfg.learning_rate] * 2
    assert member.optimizer.param_groups[0]["lr"] == cfg.learning_rate
    before = [p.detach().clone() for p in member.model.parameters()]
    loss = members.step_member(member, CPU)
    assert loss == loss and all(p.grad is None for p in member.model.parameters())  # gradients freed after the step
    assert any(not torch.equal(a, b) for a, b in zip(before, member.model.parameters()))


def test_training_and_the_predictor_use_the_cards_learning_rate(adam_rates, monkeypatch):
    from foxlib.memory import predict
    from foxlib.harness.training import train_tft
    cfg = dataclasses.replace(_small("tft"), lr=3e-4)
    train_tft(cfg, max_steps=1, eval_every=1, val_windows=4, show_progress=False)
    assert adam_rates == [3e-4]
    dqn = _small("dqn")
    monkeypatch.setattr(predict, "_PREDICTED", {})  # predicted here, not given from an earlier test's prediction
    predict.predict_step(MODELS["dqn"], dqn)
    assert adam_rates[1:] == [dqn.learning_rate]


def test_a_prediction_from_the_cards_batch_is_made_once_a_process(monkeypatch):
    from foxlib.memory import predict
    monkeypatch.setattr(predict, "_PREDICTED", {})
    made = []
    real = predict.predict_model_step
    monkeypatch.setattr(predict, "predict_model_step", lambda *a, **k: made.append(k) or real(*a, **k))
    dqn = _small("dqn")
    first = predict.predict_step(MODELS["dqn"], dqn)
    assert predict.predict_step(MODELS["dqn"], dqn) is first and len(made) == 1  # the same arguments: given again
    cuda = predict.predict_step(MODELS["dqn"], dqn, target="cuda")  # other arguments: predicted
    assert len(made) == 2 and made[1]["foreach"] is True and cuda.optimizer_state == first.optimizer_state
    batch = MODELS["dqn"].example_batch(dqn, device="cpu", seed=0)
    again = predict.predict_step(MODELS["dqn"], dqn, batch=batch)  # a batch of the caller's: always predicted
    assert len(made) == 3 and again is not first and again.peak == first.peak


def test_optimizer_for_passes_adam_options_through():
    recipe = StepRecipe("ppo", _small("ppo"))
    opt = optimizer_for(recipe, MODELS["ppo"].build(recipe.cfg), capturable=True)
    assert opt.param_groups[0]["lr"] == recipe.cfg.learning_rate and opt.param_groups[0]["capturable"]


@pytest.mark.parametrize("model", ["tft", "dqn"])
def test_the_same_seed_gives_the_same_weights_and_batch(model):
    recipe = StepRecipe(model, _small(model), seed=3)
    a, b = build_step(recipe, CPU), build_step(recipe, CPU)
    assert all(torch.equal(x, y) for x, y in zip(a.model.state_dict().values(), b.model.state_dict().values()))
    # the batch's tensors and host arrays (DQN's replay buffer lives in numpy)
    tensors = lambda s: [torch.as_tensor(x) for x in [*accounting.iter_tensors(s.batch),  # noqa: E731
                                                      *accounting.iter_arrays(s.batch)]]
    assert tensors(a) and all(torch.equal(x, y) for x, y in zip(tensors(a), tensors(b)))
    c = build_step(dataclasses.replace(recipe, seed=4), CPU)
    assert not all(torch.equal(x, y) for x, y in zip(a.model.state_dict().values(), c.model.state_dict().values()))


@pytest.mark.parametrize("model", ["tft", "dqn", "ppo", "mamba2"])
def test_the_step_trains(model):
    step = build_step(StepRecipe(model, _small(model)), CPU)
    before = [p.detach().clone() for p in step.model.parameters()]
    first = step.step()
    assert all(p.grad is not None for p in step.model.parameters() if p.requires_grad)
    assert any(not torch.equal(a, b) for a, b in zip(before, step.model.parameters()))
    second = step.step()
    assert torch.isfinite(first) and torch.isfinite(second) and float(first) != float(second)
    assert step.optimizer.param_groups[0]["lr"] == MODELS[model].learning_rate(step.recipe.cfg)


def test_a_bad_recipe_names_the_valid_choices():
    with pytest.raises(ValueError, match="fp32"):
        StepRecipe("tft", _small("tft"), precision="fp8")
    with pytest.raises(ValueError, match="tft"):
        StepRecipe("lstm", _small("tft"))
    with pytest.raises(ValueError, match="unknown optimizer 'rmsprop'; valid optimizers: adam, sgd"):
        StepRecipe("tft", _small("tft"), optimizer="rmsprop")
    with pytest.raises(ValueError, match="are Adam's: the optimizer is 'sgd'"):
        StepRecipe("tft", _small("tft"), options=StepOptions(adam="fused"), optimizer="sgd")


def test_an_sgd_recipe_steps_plain_sgd_and_says_so():
    """The optimizer is the recipe's: SGD at the card's learning rate, stepped by the recipe's own step (no state,
    so its profile holds no optimizer state); the recipe's dict names it, and an Adam recipe's dict does not."""
    recipe = StepRecipe("dqn", _small("dqn"), optimizer="sgd")
    with build_step(recipe, CPU) as built:
        assert type(built.optimizer) is torch.optim.SGD
        assert built.optimizer.param_groups[0]["lr"] == MODELS["dqn"].learning_rate(recipe.cfg)
        before = [p.detach().clone() for p in built.model.parameters()]
        built.step()
        assert any(not torch.equal(a, b) for a, b in zip(before, built.model.parameters()))
        assert built.profile().optimizer_state == 0
    assert recipe.to_dict()["optimizer"] == "sgd" and "optimizer" not in StepRecipe("dqn", recipe.cfg).to_dict()
    with pytest.raises(ValueError, match="Adam's options \\['capturable'\\] given for 'sgd'"):
        build_step(recipe, CPU, capturable=True)


def test_profile_is_the_steps_profile():
    step = build_step(StepRecipe("dqn", _small("dqn")), CPU)
    p = step.profile()
    assert p.n_parameters == sum(x.numel() for x in step.model.parameters())
    assert p.workspace_bytes == 0 and p.process_peak == p.peak  # the CPU: no workspaces, no context
    assert set(p.buffers) == set(step.buffers)
