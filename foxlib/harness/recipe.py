"""The one training-step recipe: what "a training step of this model" means everywhere in foxlib.

A recipe names the model card, its config, the precision, the seed, the optimizer and the step's options. `build_step`
turns it into the model, one batch of real market data, the optimizer (Adam unless it says SGD) at the card's learning
rate and the one TrainingStep; the waves, notebooks, benchmarks, training and the profilers all start from here.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import torch

from foxlib.harness.step_options import OptimizerInBackward, StepOptions, backends, compile_in_place
from foxlib.memory.profile import profile_step, release_memory
from foxlib.memory.step import OPTIMIZERS, TrainingStep, check_precision, make_optimizer
from foxlib.models import MODELS


@dataclass(frozen=True)
class StepRecipe:
    """One training step of one model: which card, which config, which precision, which seed, which optimizer."""
    model: str  # a MODELS key
    cfg: Any  # the card's config dataclass
    precision: str = "fp32"
    seed: int = 0  # seeds the weights' initialisation and the batch drawn
    options: StepOptions = StepOptions()
    optimizer: str = "adam"  # foxlib.memory.step.OPTIMIZERS: "sgd" keeps no state (screening's what-if)

    def __post_init__(self):
        MODELS[self.model]  # noqa: B018 - the registry raises a ValueError naming the valid models
        check_precision(self.precision)
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; valid optimizers: {', '.join(OPTIMIZERS)}")
        if self.optimizer != "adam" and (self.options.adam == "fused" or self.options.optimizer_in_backward):
            raise ValueError(f"the step options {self.options.to_dict()} are Adam's: the optimizer is "
                             f"{self.optimizer!r}")
        if self.precision == "fp16" and self.options.optimizer_in_backward:
            raise ValueError("fp16 trains through a GradScaler, which must see every gradient before any "
                             "step: Adam in backward cannot run with it (use bf16 or fp32)")

    @property
    def card(self):
        return MODELS[self.model]

    @property
    def learning_rate(self) -> float:
        return self.card.learning_rate(self.cfg)

    def to_dict(self) -> dict[str, Any]:
        d = {"model": self.model, "config": dataclasses.asdict(self.cfg), "precision": self.precision,
             "seed": self.seed, "learning_rate": self.learning_rate}
        if not self.options.is_default:
            d["options"] = self.options.to_dict()
        if self.optimizer != "adam":
            d["optimizer"] = self.optimizer
        return d


@dataclass
class BuiltStep:
    """A recipe built on a device: the live model, batch and optimizer, and `step()` (returns the loss, detached).
    In a `with` block it is freed (free()) when the block ends."""
    recipe: StepRecipe
    model: torch.nn.Module
    batch: Any
    optimizer: torch.optim.Optimizer
    step: Callable[[], torch.Tensor]
    device: torch.device

    @property
    def loss_fn(self):
        return self.recipe.card.loss

    @property
    def buffers(self):
        """The card's named replay/rollout buffers of this batch (reported on their own line)."""
        return self.recipe.card.buffers(self.batch)

    def profile(self, *, snapshot_path: str | None = None, **kwargs: Any):
        """profile_step of this very step, the card's buffers on their own line."""
        with backends(self.recipe.options):
            return profile_step(self.model, self.batch, self.loss_fn, self.optimizer, self.recipe.precision,
                                buffers=self.buffers, snapshot_path=snapshot_path, **kwargs)

    def free(self) -> None:
        """Drop the model, batch and optimizer, so that a next measurement does not count them."""
        self.model = self.batch = self.optimizer = self.step = None  # type: ignore[assignment]
        release_memory()

    def __enter__(self) -> BuiltStep:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.free()


def optimizer_for(recipe: StepRecipe, model: torch.nn.Module, *, clip_each: float | None = None,
                  **adam: Any) -> torch.optim.Optimizer:
    """Adam over the model's parameters at the card's learning rate, as the recipe's options say (extra Adam
    options, e.g. capturable=True for a CUDA graph, pass through; clip_each: OptimizerInBackward's clipping); plain
    SGD where the recipe's optimizer is "sgd" (make_optimizer)."""
    if recipe.optimizer != "adam":
        if adam or clip_each is not None:
            given = sorted(adam) + (["clip_each"] if clip_each is not None else [])
            raise ValueError(f"Adam's options {given} given for {recipe.optimizer!r}")
        return make_optimizer(recipe.optimizer, model.parameters(), recipe.learning_rate)
    if recipe.options.adam == "fused":
        adam["fused"] = True
    if recipe.options.optimizer_in_backward:
        return OptimizerInBackward(model.parameters(), lr=recipe.learning_rate, clip_each=clip_each, **adam)
    return torch.optim.Adam(model.parameters(), lr=recipe.learning_rate, **adam)


def build_step(recipe: StepRecipe, device: torch.device | str, **adam: Any) -> BuiltStep:
    """The recipe's model (seeded), batch and optimizer on `device`, and its step callable."""
    device = torch.device(device)
    card = recipe.card
    torch.manual_seed(recipe.seed)
    model = card.build(recipe.cfg).to(device)
    model.train()
    if recipe.options.compile:
        compile_in_place(model, recipe.options.cpp_wrapper)
    batch = card.example_batch(recipe.cfg, device=device, seed=recipe.seed)
    optimizer = optimizer_for(recipe, model, **adam)
    step = TrainingStep(model, batch, card.loss, optimizer, recipe.precision, device)
    if recipe.options.sets_backends:
        plain = step

        def step(**hooks):  # TrainingStep's phase hooks pass through
            with backends(recipe.options):
                return plain(**hooks)
    return BuiltStep(recipe, model, batch, optimizer, step, device)


def graph_parts(recipe: StepRecipe, device: torch.device | str, loss=None):
    """The built step with Adam capturable=True, and a loss that copies nothing from the host (`loss`, else the
    TFT's device_loss): what a CUDA graph captures."""
    built = build_step(recipe, device, capturable=True)
    if loss is None:
        if recipe.model != "tft":
            raise ValueError(f"no host-copy-free loss known for {recipe.model!r}: pass one")
        from foxlib.models.tft import device_loss
        loss = device_loss(recipe.cfg, torch.device(device))
    return built, loss


def capture_step(recipe: StepRecipe, device: torch.device | str, loss=None, own_cublas_workspace: bool = False):
    """(the built step, its CUDA graph: foxlib.memory.cuda_graph.GraphedStep, called to replay), the options'
    backends held while it is captured (kernels are chosen then). own_cublas_workspace: GraphedStep.capture's."""
    from foxlib.memory.cuda_graph import GraphedStep
    built, loss = graph_parts(recipe, device, loss)
    with backends(recipe.options):
        graphed = GraphedStep(built.model, built.batch, loss, built.optimizer, recipe.precision).capture(
            own_cublas_workspace)
    return built, graphed
