"""How many kernels one TFT training step issues, and where they come from.

On a large GPU the seed TFT's step is bound by the number of small kernels, not by arithmetic.
`count_step` runs one training step of a recipe (zero_grad, forward + loss, backward, Adam: the
step every wave times, foxlib.harness.recipe) under a TorchDispatchMode that sees every aten op
below autograd and autocast (forward, backward, casts, the optimizer): each op is one kernel
launch or more on CUDA (a few, e.g. views, launch none). Ops are attributed to the model's blocks:
a forward op to the innermost model submodule (or TFT method) on the Python stack when it was
called; a backward op to the block that made the autograd node running it (the node is tagged in
the forward by a TorchFunctionMode). Matrix products (mm, addmm, bmm, baddbmm, ...) are counted
apart. Deterministic: a count, not a timing (tests/test_vsn_batched.py).

On the CPU the LSTMs are oneDNN's (one op per layer and direction, as cuDNN's on CUDA), attention
with dropout is the explicit path (CUDA: fused SDPA) and Adam is the one asked for (`adam`).

    python -m foxlib.harness.op_count                      # the seed step, old vs batched VSN path
    python -m foxlib.harness.op_count --device cuda --time # + eager and graphed step times (time_variants)
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import sys
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from foxlib.harness.fresh_process import measure_in_fresh_process, variant_spec
from foxlib.harness.recipe import StepRecipe, build_step
from foxlib.harness.step_options import StepOptions
from foxlib.harness.timing import Timing, interval_of_samples
from foxlib.memory.cuda_graph import own_workspace, profile_from_dict

MATMULS = frozenset({"mm", "addmm", "bmm", "baddbmm", "addbmm", "addmv", "mv", "dot", "_addmm_activation"})
VIEWS = frozenset({"view", "_unsafe_view", "t", "transpose", "permute", "expand", "unsqueeze", "squeeze",
                   "slice", "select", "as_strided", "alias", "detach", "split", "split_with_sizes", "unbind",
                   "unfold", "_reshape_alias", "view_as_real", "diagonal", "chunk"})
"""Ops that make views: no kernel on CUDA (counted, and shown apart)."""
ROOT_METHODS = {"_select_static": "static VSN", "_select_past": "encoder VSN", "_select_past_folded": "encoder VSN",
                "_select_future": "decoder VSN", "_select_future_folded": "decoder VSN", "_lstm_block": "LSTMs",
                "_attention_block": "attention", "_output_block": "output"}
BLOCKS = {"static_embedding": "static VSN", "static_vsn": "static VSN", "known_embedding": "embeddings",
          "observed_embedding": "embeddings", "static_encoders": "static encoders", "encoder_vsn": "encoder VSN",
          "decoder_vsn": "decoder VSN", "lstm_encoder": "LSTMs", "lstm_decoder": "LSTMs",
          "post_lstm_gate": "post-LSTM gate", "static_enrichment": "attention", "attention": "attention",
          "post_attention_gate": "attention", "positionwise_grn": "output", "pre_output_gate": "output",
          "output": "output"}
VSN_PARTS = {"flat_grn": "flat GRN", "_folded_weights": "flat GRN", "_batched_weights": "flat GRN", "variable_grns": "variable GRNs"}
TAG = "foxlib_block"


@dataclass
class OpCount:
    """One step's aten ops: per block, in forward or backward, matrix products and views apart."""
    total: int = 0
    matmuls: int = 0
    views: int = 0
    blocks: dict[str, collections.Counter] = field(default_factory=dict)
    ops: collections.Counter = field(default_factory=collections.Counter)

    def add(self, block: str, phase: str, name: str) -> None:
        c = self.blocks.setdefault(block, collections.Counter())
        kind = "matmul" if name in MATMULS else "view" if name in VIEWS else "other"
        c.update((phase, f"{phase}_{kind}"))
        self.total += 1
        self.matmuls += kind == "matmul"
        self.views += kind == "view"
        self.ops[name] += 1

    def per_block(self) -> dict[str, dict[str, int]]:
        """{block: {ops, fwd, bwd, matmuls, views}}."""
        return {b: {"ops": c["fwd"] + c["bwd"], "fwd": c["fwd"], "bwd": c["bwd"],
                     "matmuls": c["fwd_matmul"] + c["bwd_matmul"], "views": c["fwd_view"] + c["bwd_view"]}
                for b, c in sorted(self.blocks.items(), key=lambda kv: -sum(kv[1][p] for p in ("fwd", "bwd")))}

    def to_dict(self) -> dict:
        return {"total": self.total, "matmuls": self.matmuls, "views": self.views, "blocks": self.per_block(),
                "top_ops": dict(self.ops.most_common(25))}


def _label_from_stack(names: dict[int, str], root: torch.nn.Module) -> str:
    """The block of the innermost model submodule (or TFT method) on the caller's stack."""
    frame = sys._getframe(2)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if owner is root and frame.f_code.co_name in ROOT_METHODS:
            block = ROOT_METHODS[frame.f_code.co_name]
            return f"{block}: inputs" if block.endswith("VSN") else block
        if qual := names.get(id(owner)):  # None is no module
            parts = qual.split(".")
            block = BLOCKS.get(parts[0], parts[0])
            if block.endswith("VSN"):
                part = VSN_PARTS.get(parts[1] if len(parts) > 1 else frame.f_code.co_name, "selection + sum")
                return f"{block}: {part}"
            return block
        if frame.f_code.co_name == "quantile_loss":
            return "loss"
        frame = frame.f_back
    return "other"


class _Tagger(TorchFunctionMode):
    """Tags every autograd node the forward makes with its block (grad_fn.metadata)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.root = model
        self.names = {id(m): n for n, m in model.named_modules() if n}
        self.current = "other"

    def __torch_function__(self, func, types, args=(), kwargs=None):
        label = _label_from_stack(self.names, self.root)
        prev, self.current = self.current, label
        try:
            out = func(*args, **(kwargs or {}))
        finally:
            self.current = prev
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.grad_fn is not None:
                _tag(t.grad_fn, label)
        return out


def _tag(node, label: str) -> None:
    """Tag `node` and the untagged nodes behind it (those a composite op made inside it: einsum's bmm,
    linear's transpose), stopping at tagged ones (an earlier op's) and at the leaves."""
    todo = [node]
    while todo:
        n = todo.pop()
        if n is None or TAG in n.metadata or "AccumulateGrad" in n.name():
            continue
        n.metadata[TAG] = label
        todo.extend(f for f, _ in n.next_functions)


class _Counter(TorchDispatchMode):
    def __init__(self, tagger: _Tagger, count: OpCount):
        super().__init__()
        self.tagger, self.count, self.phase = tagger, count, "fwd"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        node = torch._C._current_autograd_node()
        if node is not None:
            block = node.metadata.get(TAG, "AccumulateGrad" if "AccumulateGrad" in node.name() else "other")
            self.count.add(block, "bwd", name)
        else:
            self.count.add(self.tagger.current if self.phase == "fwd" else self.phase, "fwd", name)
        return func(*args, **(kwargs or {}))


def count_step(recipe: StepRecipe, device: str | torch.device = "cpu") -> OpCount:
    """The aten ops of one training step of `recipe` (after one warm-up step: Adam's state exists)."""
    built = build_step(recipe, device)
    built.step()
    tagger = _Tagger(built.model)
    counter = _Counter(tagger, OpCount())
    opt_step = built.optimizer.step

    def optimizer_step(*a, **k):  # ops outside forward and backward: the optimizer's
        counter.phase = "Adam"
        try:
            return opt_step(*a, **k)
        finally:
            counter.phase = "fwd"

    built.optimizer.step = optimizer_step
    try:
        with tagger, counter:
            built.step()
    finally:
        del built.optimizer.step
    return counter.count


def seed_recipe(vsn_batched: bool, precision: str = "bf16", adam: str = "fused", preset: str = "seed",
                optimizer_in_backward: bool = False, **overrides) -> StepRecipe:
    """The seed step on the memory-efficient path, per-chunk (vsn_batched False, vsn_chunk 4) or batched VSNs
    (vsn_chunk 0, all variables at once, unless overridden)."""
    from foxlib.models import MODELS
    overrides = {"vsn_chunk": 0 if vsn_batched else 4, **overrides}
    cfg = dataclasses.replace(MODELS["tft"].preset(preset), memory_efficient=True, vsn_batched=vsn_batched,
                              **overrides)
    return StepRecipe("tft", cfg, precision, options=StepOptions(adam=adam, optimizer_in_backward=optimizer_in_backward))


def table(counts: dict[str, OpCount]) -> str:
    """A text table: per block, the ops (fwd/bwd) and matrix products of each counted variant."""
    def row(label: str, cells: list) -> str:
        return f"{label:34s}" + "".join(f" | {x:>30}" for x in cells)

    head = row("block", [n[:30] for n in counts])
    lines = [head, "-" * len(head)]
    for b in dict.fromkeys(b for c in counts.values() for b in c.per_block()):
        rs = [c.per_block().get(b, {"ops": 0, "fwd": 0, "bwd": 0, "matmuls": 0}) for c in counts.values()]
        lines.append(row(b, [f"{r['ops']:6d} ops ({r['fwd']:4d}+{r['bwd']:5d}) {r['matmuls']:4d} mm" for r in rs]))
    lines.append(row("TOTAL", [f"{c.total:6d} ops ({c.views:5d} views) {c.matmuls:4d} mm" for c in counts.values()]))
    lines.append(row("kernels (ops less views)", [c.total - c.views for c in counts.values()]))
    return "\n".join(lines)


def time_variants(recipes: dict[str, StepRecipe], device: str | torch.device = "cpu", *,
                  rounds: int = 180) -> dict[str, Any]:
    """Peaks, then alternating step times of every recipe, eager and graphed (CUDA), for --time: a fresh process
    (foxlib.harness.fresh_process) profiles each variant on a model of its own, then runs `rounds` rounds, each
    running every variant's step once, so nothing this process made is in its peaks. The allocator peak is the
    model peak + the step's own cuBLAS workspaces (foxlib.memory.cuda_graph.own_workspace), as wave 8.12 reports
    it; each variant's ratio to the first recipe's of the same kind (eager or graph) comes with its bootstrap
    interval. {"device", "rounds", "variants": {name: {...}}}."""
    device = torch.device(device)
    kinds = ("eager", "graph") if device.type == "cuda" else ("eager",)
    # each config as overrides of the seed preset: the child rebuilds it exactly (variant_spec)
    variants = {f"{name}, {kind}": variant_spec(r.cfg, "seed", r.precision, r.seed, device, kind == "graph", r.options)
                for name, r in recipes.items() for kind in kinds}
    child = measure_in_fresh_process({"device": device.type, "profile": True, "steps": rounds, "variants": variants})
    if "error" in child:
        raise RuntimeError(f"the timing process failed: {child['error']}")
    result: dict[str, Any] = {"device": str(device), "rounds": rounds, "variants": {}}
    first = {kind: next(n for n in variants if n.endswith(kind)) for kind in kinds}
    for n, v in child["variants"].items():
        prof, kind = v["profile"], n.rsplit(", ", 1)[1]
        t = Timing(n, tuple(v["step_s_samples"]))
        own = own_workspace(profile_from_dict(prof))  # an int: every variant has an allocator peak
        row = {"model_peak_bytes": prof["peak"], "allocator_peak_bytes": prof["peak"] + own,
               "median_ms": 1e3 * t.median_s, "iqr_ms": 1e3 * t.iqr_s, "noisy": t.noisy,
               "samples_ms": [1e3 * s for s in t.samples]}
        line = f"{n:48s} {row['median_ms']:8.2f} ms/step (IQR {row['iqr_ms']:.2f})"
        if n != first[kind]:
            r = interval_of_samples(v["step_s_samples"], child["variants"][first[kind]]["step_s_samples"])
            row |= {"ratio_to": first[kind], "ratio": r.to_dict()}
            line += f"  {r.median:.3f}x [{r.low:.3f}, {r.high:.3f}] of the first"
        result["variants"][n] = row
        line += (f"  model peak {row['model_peak_bytes'] / 1e6:.1f} MB, "
                 f"allocator peak {row['allocator_peak_bytes'] / 1e6:.1f} MB")
        print(line, flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m foxlib.harness.op_count", description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--preset", default="seed")
    p.add_argument("--precision", default="bf16", choices=("fp32", "bf16"))
    p.add_argument("--adam", default="fused", choices=("default", "fused"))
    p.add_argument("--dropout", type=float, default=None, help="override the preset's dropout")
    p.add_argument("--checkpointing", default=None, help="both variants' checkpointing (e.g. vsn_variables)")
    p.add_argument("--chunk", type=int, default=0, help="the batched variant's vsn_chunk (0: all variables)")
    p.add_argument("--optimizer-in-backward", action="store_true", help="Adam applied in backward (both variants)")
    p.add_argument("--time", action="store_true", help="also time the steps (time_variants)")
    p.add_argument("--rounds", type=int, default=180, help="alternating rounds, one step of every variant each")
    p.add_argument("--compile", action="store_true",
                   help="also time the batched variant with torch.compile (step_options: not counted, its kernels are "
                        "inductor's own)")
    p.add_argument("--out", default=None, help="write the counts (and times) as JSON here")
    a = p.parse_args(argv)
    extra = {k: v for k, v in (("dropout", a.dropout), ("checkpointing", a.checkpointing)) if v is not None}
    common, batched = (a.precision, a.adam, a.preset, a.optimizer_in_backward), f"batched VSNs (vsn_chunk {a.chunk})"
    variants = {"per-chunk VSNs (vsn_chunk 4)": seed_recipe(False, *common, **extra),
                batched: seed_recipe(True, *common, vsn_chunk=a.chunk, **extra)}
    counts = {n: count_step(r, a.device) for n, r in variants.items()}
    print(f"one training step, {a.preset} preset, {a.precision}, {a.adam} Adam"
          f"{' in backward' if a.optimizer_in_backward else ''}, {extra or 'no overrides'}, on {a.device}:")
    print(table(counts))
    result = {"counts": {n: c.to_dict() for n, c in counts.items()}}
    if a.time:
        if a.compile:
            compiled = dataclasses.replace(variants[batched].options, compile=True)
            variants[f"{batched}, torch.compile"] = dataclasses.replace(variants[batched], options=compiled)
        result["timing"] = time_variants(variants, a.device, rounds=a.rounds)
    if a.out:
        import json
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
