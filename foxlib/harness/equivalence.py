"""Same function, shown as numbers: max |Δ| of outputs and gradients of a variant (checkpointing, the
memory-efficient path, a CUDA graph) against the plain TFT step, from the same weights and batch with dropout 0
(in the config: checkpointed segments run only in training mode), relative to the reference's max |value|.
Rounding differs between the paths, so the figures are small, not zero (TOLERANCE_REL).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from foxlib.core.schema import Record
from foxlib.harness.recipe import StepRecipe, build_step
from foxlib.harness.step_options import StepOptions, backends
from foxlib.memory.step import autocast, check_precision
from foxlib.models.tft import quantile_loss

TOLERANCE_REL = {"fp32": 1e-4, "bf16": 5e-2, "fp16": 1e-2}
"""Largest max |Δ| / max |reference| (outputs and gradients) of the same function, per precision:
float32 rounding (~1e-7 per op) through a few hundred ops; 16-bit rounding (bf16: 2^-8, fp16: 2^-11)."""
EQUIVALENT_FIELDS = ("checkpointing", "memory_efficient", "vsn_chunk", "vsn_batched")
"""TFTConfig fields that change how the function is computed, not which function."""


@dataclass(frozen=True)
class Equivalence(Record):
    """A variant's outputs and gradients (over every parameter) against the reference's; `same`: both relative
    differences within tolerance_rel."""
    variant: str
    precision: str
    device: str
    output_max_abs_diff: float
    output_ref_max_abs: float
    output_rel_diff: float
    grad_max_abs_diff: float
    grad_ref_max_abs: float
    grad_rel_diff: float
    worst_parameter: str  # whose gradient differs most
    loss_abs_diff: float
    tolerance_rel: float
    same: bool


@dataclass(frozen=True)
class FailedCheck(Record):
    """A same-function check that could not run (the variant cannot run on this device, say): why."""
    variant: str
    error: str


def check_from_dict(d: dict[str, Any]) -> Equivalence | FailedCheck:
    """A stored same-function check typed: why it could not run (its "error" key), else its figures."""
    return (FailedCheck if "error" in d else Equivalence).from_dict(d)


def _eager(model, batch, precision: str, device: torch.device) -> dict[str, Any]:
    """Forward + loss + backward in training mode: the prediction, the loss and every gradient (float32)."""
    model.train()
    model.zero_grad(set_to_none=True)
    with autocast(device, precision):
        pred = model(batch)
        loss = quantile_loss(pred, batch["target"], model.config.quantiles)
    loss.backward()
    return _read(model, pred, loss)


def _read(model, pred, loss) -> dict[str, Any]:
    return {"pred": pred.detach().float().clone(), "loss": float(loss.detach().float()),
            "grads": {n: p.grad.detach().float().clone() for n, p in model.named_parameters() if p.grad is not None}}


def _graphed(model, batch, optimizer, precision: str, device: torch.device) -> dict[str, Any]:
    """The training step captured in one CUDA graph (the GraphedStep 8.12 times; `optimizer`: capturable), replayed
    once from the model's current weights: its prediction, loss and gradients."""
    from foxlib.memory.cuda_graph import GraphedStep

    weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    levels = torch.tensor(model.config.quantiles, dtype=torch.float32, device=device)
    kept: dict[str, torch.Tensor] = {}

    def loss_fn(m, b):  # device_loss's loss, keeping the prediction (the graph's static output)
        kept["pred"] = m(b)
        return quantile_loss(kept["pred"], b["target"], levels)

    step = GraphedStep(model, batch, loss_fn, optimizer, precision).capture()
    model.load_state_dict(weights)  # the warm-up steps moved the weights: back, in place (the graph reads them)
    loss = step()
    torch.cuda.synchronize(device)
    return _read(model, kept["pred"], loss)  # gradients and prediction of the replay, before its Adam update


def compare(reference: dict[str, Any], variant: dict[str, Any], *, name: str, precision: str,
            device: str) -> Equivalence:
    """Max |Δ| of two runs' predictions and gradients (as _eager returns them)."""
    tol = TOLERANCE_REL[precision]
    out_diff = float((variant["pred"] - reference["pred"]).abs().max())
    out_ref = float(reference["pred"].abs().max())
    missing = sorted(set(reference["grads"]) ^ set(variant["grads"]))
    if missing:
        raise ValueError(f"the variant's gradients are not the reference's parameters: {missing}")
    worst, grad_diff, grad_ref = "", 0.0, 0.0
    for n, g in reference["grads"].items():
        d = float((variant["grads"][n] - g).abs().max())
        grad_ref = max(grad_ref, float(g.abs().max()))
        if d >= grad_diff:
            worst, grad_diff = n, d
    out_rel = out_diff / out_ref if out_ref else float(out_diff > 0)
    grad_rel = grad_diff / grad_ref if grad_ref else float(grad_diff > 0)
    return Equivalence(name, precision, device, out_diff, out_ref, out_rel, grad_diff, grad_ref, grad_rel, worst,
                       abs(variant["loss"] - reference["loss"]), tol, bool(out_rel <= tol and grad_rel <= tol))


def reference_run(reference_cfg, *, precision: str = "fp32", device: str | torch.device = "cpu",
                  seed: int = 0) -> dict[str, Any]:
    """The plain step of `reference_cfg` (dropout 0, the weights and batch of `seed`), to pass to
    same_function(reference=...) for several variants."""
    device = torch.device(device)
    recipe = StepRecipe("tft", dataclasses.replace(reference_cfg, dropout=0.0), precision, seed)
    with build_step(recipe, device) as built:
        run = _eager(built.model, built.batch, precision, device)
        run.update(cfg=reference_cfg, precision=precision, device=str(device), seed=seed, batch=built.batch,
                   weights={k: v.detach().clone() for k, v in built.model.state_dict().items()})
    return run


def same_function(reference_cfg, variant_cfg, *, precision: str = "fp32", device: str | torch.device = "cpu",
                  seed: int = 0, cuda_graph: bool = False, options: StepOptions = StepOptions(), name: str = "",
                  variant_seed: int | None = None, reference: dict[str, Any] | None = None) -> Equivalence:
    """The TFT of `variant_cfg` (`cuda_graph`: its step as one CUDA graph; `options`: the step's options, e.g.
    compiled by torch.compile, foxlib.harness.step_options.compile_in_place, with inductor's C++ wrapper) against
    the plain step of `reference_cfg`, both with dropout 0, the weights of `seed` and one batch, in `precision`.
    Options that change the numbers (StepOptions.numeric_changes) are refused: they compute another function.
    `variant_seed`: another seed's weights (a different function, to test the test). `reference`: reference_run's,
    to reuse."""
    check_precision(precision)
    device = torch.device(device)
    ref, var = dataclasses.asdict(reference_cfg), dataclasses.asdict(variant_cfg)
    other = sorted(k for k in ref if k not in EQUIVALENT_FIELDS and ref[k] != var[k])
    if other:
        raise ValueError(f"the variant changes {other}: it computes another function; only "
                         f"{', '.join(EQUIVALENT_FIELDS)} may differ from the reference")
    if options.changes_numerics:
        raise ValueError(f"the options {', '.join(options.numeric_changes)} change the numbers: another function")
    if cuda_graph and device.type != "cuda":
        raise ValueError(f"a CUDA graph needs a CUDA device, not {device}")
    if reference is None:
        reference = reference_run(reference_cfg, precision=precision, device=device, seed=seed)
    elif (reference["cfg"], reference["precision"], reference["device"], reference["seed"]) != (
            reference_cfg, precision, str(device), seed):
        raise ValueError("the reference run was made with other arguments (config, precision, device or seed)")
    # the recipe's model (compiled where the options say) and Adam (capturable for a graph); the reference's batch
    recipe = StepRecipe("tft", dataclasses.replace(variant_cfg, dropout=0.0), precision,
                        seed if variant_seed is None else variant_seed, options)
    with build_step(recipe, device, **({"capturable": True} if cuda_graph else {})) as built:
        if variant_seed is None:
            built.model.load_state_dict(reference["weights"])
        batch = {k: v.clone() for k, v in reference["batch"].items()}  # a graph refills its inputs: a copy
        with backends(options):
            run = (_graphed(built.model, batch, built.optimizer, precision, device) if cuda_graph
                   else _eager(built.model, batch, precision, device))
    return compare(reference, run, name=name or _describe(variant_cfg, cuda_graph, options), precision=precision,
                   device=str(device))


def _describe(cfg, cuda_graph: bool, options: StepOptions) -> str:
    parts = [f"checkpointing={cfg.checkpointing}", f"memory_efficient={cfg.memory_efficient}",
             f"vsn_chunk={cfg.vsn_chunk}", "vsn_batched=True" if cfg.vsn_batched else "",
             "CUDA graph" if cuda_graph else "", options.label()]
    return ", ".join(p for p in parts if p)  # the default options' label is empty
