"""Wave 8.12's strategies: each a TFT configuration (a precision and overrides of the base config),
with the seed's guess it answers (foxlib.core.seed_claims.STRATEGY_GUESSES) and whether it changes the
function the model computes (checkpointing, the memory-efficient path and CUDA graphs do not).

The "+ CUDA graph" strategies run the whole step as one captured graph (foxlib.memory.cuda_graph):
the same arithmetic without a launch per kernel. CUDA only (skipped on the CPU, and said so). They
compete for the recommendation: wave 8.13 trains and serves a graphed recommendation with captured
steps (wave_8_13/serve.py). The fast path's knobs (foxlib.harness.step_options: fused Adam, Adam
applied in backward, TF32, the LSTMs without cuDNN) are strategies too; TF32, Adam in backward (its
gradients clipped per parameter in the accuracy runs) and the LSTMs without cuDNN change the numbers,
and get their own accuracy runs.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch

from foxlib.harness.step_options import StepOptions


@dataclass(frozen=True)
class Strategy:
    """One TFT configuration to measure: its precision, the overrides of the base config (a float for
    batch_size or encoder_length is a fraction of the base's), the seed's guess it answers."""
    name: str
    precision: str = "fp32"
    overrides: dict[str, Any] = field(default_factory=dict)
    seed_guess: str | None = None  # key of seed.STRATEGY_GUESSES
    changes_numerics: bool = False  # computes another function than the baseline of its precision
    cuda_graph: bool = False  # the whole step captured in one CUDA graph (CUDA only)
    options: StepOptions = StepOptions()  # fused Adam, Adam in backward, TF32 (foxlib.harness.step_options)

    def __post_init__(self):  # step options that change the numbers make the strategy change them too
        if self.options.changes_numerics:
            object.__setattr__(self, "changes_numerics", True)


BATCHED = {"memory_efficient": True, "vsn_batched": True, "vsn_chunk": 0}  # vsn_chunk 0: all variables at once
STRATEGIES = {s.name: s for s in (
    Strategy("fp32 (baseline)", changes_numerics=True),
    Strategy("fp16", "fp16", seed_guess="fp16", changes_numerics=True),
    Strategy("bf16", "bf16", changes_numerics=True),
    Strategy("checkpoint VSNs", overrides={"checkpointing": "vsn"}, seed_guess="checkpointing"),
    Strategy("checkpoint blocks", overrides={"checkpointing": "blocks"}, seed_guess="checkpointing"),
    Strategy("checkpoint all", overrides={"checkpointing": "all"}, seed_guess="checkpointing"),
    Strategy("memory-efficient path", overrides={"memory_efficient": True}),
    # fractions of the baseline: the seed's 32 -> 8 and 60 -> 30
    Strategy("batch ÷4", overrides={"batch_size": 0.25}, seed_guess="batch_8", changes_numerics=True),
    Strategy("sequence ÷2", overrides={"encoder_length": 0.5}, seed_guess="sequence_30", changes_numerics=True),
    Strategy("efficient + bf16", "bf16", {"memory_efficient": True}),
    Strategy("efficient + checkpoint blocks", overrides={"memory_efficient": True, "checkpointing": "blocks"}),
    Strategy("efficient + checkpoint blocks + bf16", "bf16", {"memory_efficient": True, "checkpointing": "blocks"}),
    Strategy("efficient + checkpoint blocks + fp16", "fp16", {"memory_efficient": True, "checkpointing": "blocks"}),
    # "variables": blocks, with the encoder/decoder VSNs checkpointed per chunk of vsn_chunk variables
    Strategy("checkpoint variables", overrides={"checkpointing": "variables"}, seed_guess="checkpointing"),
    Strategy("efficient + checkpoint variables", overrides={"memory_efficient": True, "checkpointing": "variables"}),
    Strategy("efficient + checkpoint variables + bf16", "bf16", {"memory_efficient": True, "checkpointing": "variables"}),
    # "vsn_variables": only the encoder/decoder VSNs (the bulk of the activations), per chunk; the rest as is
    Strategy("efficient + checkpoint VSN variables", overrides={"memory_efficient": True, "checkpointing": "vsn_variables"}),
    Strategy("efficient + checkpoint VSN variables (8 per chunk)",
             overrides={"memory_efficient": True, "checkpointing": "vsn_variables", "vsn_chunk": 8}),
    # the same steps without a kernel launch each: one CUDA graph per step
    Strategy("CUDA graph", cuda_graph=True),
    Strategy("memory-efficient path + CUDA graph", overrides={"memory_efficient": True}, cuda_graph=True),
    Strategy("efficient + checkpoint VSN variables + CUDA graph",
             overrides={"memory_efficient": True, "checkpointing": "vsn_variables"}, cuda_graph=True),
    Strategy("efficient + checkpoint VSN variables (8 per chunk) + CUDA graph",
             overrides={"memory_efficient": True, "checkpointing": "vsn_variables", "vsn_chunk": 8}, cuda_graph=True),
    # toward the hardware's limit: 16-bit and TF32 inside the graph, a fused Adam, Adam applied in backward
    Strategy("efficient + bf16 + CUDA graph", "bf16", {"memory_efficient": True}, cuda_graph=True),
    Strategy("efficient + checkpoint VSN variables + bf16 + CUDA graph", "bf16",
             {"memory_efficient": True, "checkpointing": "vsn_variables"}, cuda_graph=True),
    Strategy("efficient + TF32 + CUDA graph", overrides={"memory_efficient": True}, cuda_graph=True,
             options=StepOptions(tf32=True)),
    Strategy("efficient + bf16 + CUDA graph + fused Adam", "bf16", {"memory_efficient": True}, cuda_graph=True,
             options=StepOptions(adam="fused")),
    # fewer, larger kernels: every variable's GRN of a VSN in one batched product per layer (vsn_batched,
    # vsn_chunk 0: all variables at once); eager in bf16, and graphed as the shipped step is
    # (foxlib.harness.op_count times the eager and graphed steps against today's, with their op counts)
    Strategy("efficient + batched VSNs + bf16", "bf16", BATCHED),
    Strategy("efficient + batched VSNs + bf16 + CUDA graph + fused Adam", "bf16", BATCHED, cuda_graph=True,
             options=StepOptions(adam="fused")),
    # fewer still: the batched step compiled by torch.compile (inductor fuses its elementwise kernels; the same
    # function: step_options), eager and graphed; CUDA only (COMPILE_SKIPPED)
    Strategy("efficient + batched VSNs + bf16 + fused Adam + torch.compile", "bf16", BATCHED,
             options=StepOptions(adam="fused", compile=True)),
    Strategy("efficient + batched VSNs + bf16 + CUDA graph + fused Adam + torch.compile", "bf16", BATCHED,
             cuda_graph=True, options=StepOptions(adam="fused", compile=True)),
    # the eager step is bound by the host's time per launch (reports/h200/batched-vsn/README.md): the kernels
    # launched from C++, independent ones fused side by side (step_options.cpp_wrapper)
    Strategy("efficient + batched VSNs + bf16 + fused Adam + torch.compile (C++ wrapper)", "bf16", BATCHED,
             options=StepOptions(adam="fused", compile=True, cpp_wrapper=True)),
    # lighter: the gradients never all alive (Adam in backward: the accuracy runs of the other Adam-in-backward
    # strategies of bf16), the compiled batched step otherwise the recommendation's (53b1112: 542.1 MB)
    Strategy("efficient + batched VSNs + bf16 + CUDA graph + Adam in backward + torch.compile", "bf16", BATCHED,
             cuda_graph=True, options=StepOptions(optimizer_in_backward=True, adam="fused", compile=True)),
    # chunking bounds memory: the encoder VSN's 37 variables in two batched chunks (a smaller backward transient)
    Strategy("efficient + batched VSNs (19 per chunk) + bf16 + CUDA graph + fused Adam", "bf16",
             {**BATCHED, "vsn_chunk": 19}, cuda_graph=True, options=StepOptions(adam="fused")),
    # lighter: the batched kernels per checkpointed chunk of variables, Adam applied in backward
    Strategy("efficient + batched VSNs + checkpoint VSN variables + bf16 + CUDA graph + Adam in backward", "bf16",
             {**BATCHED, "checkpointing": "vsn_variables", "vsn_chunk": 4}, cuda_graph=True,
             options=StepOptions(optimizer_in_backward=True, adam="fused")),
    # the LSTMs on PyTorch's own kernels instead of cuDNN's (other kernels: own accuracy runs)
    Strategy("efficient + bf16 + CUDA graph + fused Adam, LSTMs without cuDNN", "bf16", {"memory_efficient": True},
             cuda_graph=True, options=StepOptions(adam="fused", cudnn=False)),
    Strategy("efficient + bf16 + CUDA graph + Adam in backward", "bf16", {"memory_efficient": True}, cuda_graph=True,
             options=StepOptions(optimizer_in_backward=True, adam="fused")),
    Strategy("efficient + checkpoint VSN variables + bf16 + CUDA graph + Adam in backward", "bf16",
             {"memory_efficient": True, "checkpointing": "vsn_variables"}, cuda_graph=True,
             options=StepOptions(optimizer_in_backward=True, adam="fused")),
)}
GRAPH_SKIPPED = "skipped: a CUDA graph needs a CUDA device"
COMPILE_SKIPPED = ("skipped: the torch.compile strategies are measured on CUDA, where they cut kernel launches "
                   "(on a CPU inductor builds C++ kernels instead: not what they are for)")
BASELINE = "fp32 (baseline)"


def select(names: str) -> list[Strategy]:
    if names == "all":
        return list(STRATEGIES.values())
    chosen = [n.strip() for n in names.split(";") if n.strip()]
    bad = [n for n in chosen if n not in STRATEGIES]
    if bad:
        raise ValueError(f"unknown strategy {bad}; valid strategies: {'; '.join(STRATEGIES)}")
    if BASELINE not in chosen:
        chosen.insert(0, BASELINE)
    return [STRATEGIES[n] for n in chosen]


def runnable(chosen: list[Strategy], device: torch.device) -> tuple[list[Strategy], dict[str, str]]:
    """The strategies this device can run, and the others with why not (CUDA graphs and torch.compile on a CPU)."""
    if device.type == "cuda":
        return chosen, {}
    why = {s.name: GRAPH_SKIPPED if s.cuda_graph else COMPILE_SKIPPED for s in chosen
           if s.cuda_graph or s.options.compile}
    return [s for s in chosen if s.name not in why], why


def resolve_overrides(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A float for batch_size or encoder_length is a fraction of the base config's value."""
    return {k: max(1, round(base[k] * v)) if isinstance(v, float) and k in ("batch_size", "encoder_length") else v
            for k, v in overrides.items()}


def configure(base, overrides: dict[str, Any]):
    """`base` (a TFTConfig) with `overrides` resolved against it."""
    return dataclasses.replace(base, **resolve_overrides(dataclasses.asdict(base), overrides))


def accuracy_key(s: Strategy) -> tuple:
    """Strategies that compute the same function share accuracy runs: key = precision + numeric overrides
    (+ the step options that change the numbers: StepOptions.numeric_changes)."""
    numeric = tuple(sorted((k, v) for k, v in s.overrides.items() if k in ("batch_size", "encoder_length")))
    return (s.precision, numeric) + ((s.options.numeric_changes,) if s.options.numeric_changes else ())
