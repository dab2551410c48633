"""`measure()`, the wave's one entry that runs models: the parameters checked (`check_parameters`, for
foxlib.run.preflight), every library warmed up, the CUDA context measured and the cap set, the
ensemble trained interleaved and served all at once with NVML sampled throughout (CUDA); on the CPU
the same run checked by accounting. It returns plain data (JSON-able, bytes)."""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import torch

from foxlib.core.card_classes import CardClass, class_of, classes_for, get_class
from foxlib.core.progress import progress
from foxlib.core.results import json_safe
from foxlib.harness.measure_step import measure_model
from foxlib.harness.step_options import StepOptions
from foxlib.memory.cuda import use_cublas_workspace
from foxlib.memory.devices import describe, environment, resolve_device, short_name
from foxlib.memory.step import check_precision
from foxlib.models import ENSEMBLE, MODELS
from foxlib.waves.wave_8_13.account import NOT_ENFORCED, account_training
from foxlib.waves.wave_8_13.cap import cap_arithmetic, measure_context
from foxlib.waves.wave_8_13.members import Member, free_members
from foxlib.waves.wave_8_13.nvml import NvmlProcessReader, Sampler, nvml_samples
from foxlib.waves.wave_8_13.records import SCHEMA_VERSION
from foxlib.waves.wave_8_13.serve import infer
from foxlib.waves.wave_8_13.tft import resolve_tft
from foxlib.waves.wave_8_13.train import train_cpu, train_cuda, summarise_steps
from foxlib.waves.wave_8_13.warmup import warm_up

GIB = 2**30
INFERENCE_MODES = ("auto", "streams", "threads")


def resolve_class(card_class: str, dev: torch.device) -> CardClass:
    """The card class a run validates: "auto" is the device's own (foxlib.core.card_classes.class_of); another GPU
    class is emulated on this GPU, never a CPU class on a GPU or a GPU class on the CPU (ValueError)."""
    own = class_of(describe(dev).get("capability"), dev.type)
    if card_class == "auto":
        return own
    chosen = get_class(card_class)
    if chosen.device_type != dev.type:
        raise ValueError(f"card_class {card_class!r} is a {chosen.device_type} class; this run is on {dev.type}: "
                         f"valid here: auto, {', '.join(c.name for c in classes_for(dev.type))}")
    return chosen


def class_facts(chosen: CardClass, dev: torch.device, tft: dict[str, Any], ensemble_precision: str) -> dict[str, Any]:
    """What the run enforces of the class's limits, and what it cannot emulate; ValueError where the TFT or the
    ensemble asks for what the class lacks (bf16 on a GPU without it)."""
    own = class_of(describe(dev).get("capability"), dev.type)
    options = tft.get("options") or {}
    for what, precision, opts in (("the TFT", tft["precision"], options), ("DQN, PPO and Mamba-2", ensemble_precision, {})):
        if not chosen.allows(precision, opts):
            raise ValueError(f"{what} in {precision}{' with TF32' if opts.get('tf32') else ''} cannot run on the "
                             f"{chosen.name} class ({chosen.title}): it runs {', '.join(chosen.precisions)}"
                             + ("" if chosen.tf32 else ", no TF32"))
    enforced = [f"precisions limited to {', '.join(chosen.precisions)} (the TFT {tft['precision']}, the others "
                f"{ensemble_precision}: checked before the run)"]
    if dev.type == "cuda" and not chosen.tf32:
        enforced.append("TF32 off for the whole run (torch.backends.cuda.matmul.allow_tf32 = "
                        "torch.backends.cudnn.allow_tf32 = False)")
    emulated = chosen.name != own.name
    return {"name": chosen.name, "title": chosen.title, "own_class": own.name, "emulated": emulated,
            "enforced": enforced,
            "not_emulated": ("the target's SM count and clocks (speed is this GPU's, not the target's) and its CUDA "
                             "context and cuBLAS workspaces: this GPU's are used, measured here, which bounds them from "
                             "above (a newer GPU loads more kernels into its context)") if emulated else ""}


@contextlib.contextmanager
def class_limits(chosen: CardClass, dev: torch.device):
    """TF32 off while the run lasts where the class has none; restored after."""
    if dev.type != "cuda" or chosen.tf32:
        yield
        return
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def _checked(*, preset: str, tft_config: str, steps: int, card_gb: float, cap_bytes: int, inference_repeats: int,
             inference_batch: int, inference_mode: str, ensemble_precision: str, device: str, card_class: str = "auto"):
    """The parameters' values checked: (device, inference mode, resolved TFT, card class facts); ValueError naming
    the valid ones."""
    if steps < 1 or inference_repeats < 1:
        raise ValueError(f"steps and inference_repeats must be at least 1, got {steps} and {inference_repeats}")
    if not card_gb > 0 or cap_bytes < 0 or inference_batch < 0:
        raise ValueError(f"card_gb must be positive and cap_bytes, inference_batch not negative; "
                         f"got {card_gb}, {cap_bytes}, {inference_batch}")
    if inference_mode not in INFERENCE_MODES:
        raise ValueError(f"unknown inference_mode {inference_mode!r}; valid: {', '.join(INFERENCE_MODES)}")
    check_precision(ensemble_precision)
    for card in MODELS.values():
        card.preset(preset)
    dev = resolve_device(device)
    is_cuda = dev.type == "cuda"
    mode = inference_mode if inference_mode != "auto" else ("streams" if is_cuda else "threads")
    if mode == "streams" and not is_cuda:
        raise ValueError("inference_mode 'streams' needs CUDA; on the CPU use threads (or auto)")
    chosen = resolve_class(card_class, dev)
    tft = resolve_tft(tft_config, preset, short_name(dev), card_class=chosen.name)
    return dev, mode, tft, class_facts(chosen, dev, tft, ensemble_precision)


def check_parameters(params: dict[str, Any]) -> None:
    """Check a wave 8.13 parameter set before anything runs (for foxlib.run.preflight): the values
    `measure` would reject, the TFT configuration included. Run parameters are ignored."""
    keys = ("preset", "tft_config", "steps", "card_gb", "cap_bytes", "inference_repeats", "inference_batch",
            "inference_mode", "ensemble_precision", "device", "card_class")
    if params.get("measurements"):
        return  # nothing is measured: the file's own parameters were checked when it was made
    _checked(**{k: params[k] for k in keys})


def measure(*, preset: str = "seed", tft_config: str = "auto", steps: int = 20, card_gb: float = 4.0,
            cap_bytes: int = 0, inference_repeats: int = 100, inference_batch: int = 0,
            inference_mode: str = "auto", ensemble_precision: str = "fp32", device: str = "auto",
            seed: int = 0, card_class: str = "auto") -> dict[str, Any]:
    """Train the four models interleaved under the card's cap, then serve them concurrently.

    card_gb: the card in GiB; the cap is that minus the CUDA context (measured). cap_bytes > 0 sets
    the allocator's cap directly (the context still comes on top): a tiny one forces an out-of-memory
    error, which is recorded ("oom"), never raised.
    card_class: the class of card validated (foxlib.core.card_classes): "auto", this device's own; another GPU
    class emulated here, with its limits enforced (class_facts, class_limits) and 8.12's recommendation for it."""
    dev, mode, tft, facts = _checked(preset=preset, tft_config=tft_config, steps=steps, card_gb=card_gb,
                                     cap_bytes=cap_bytes, inference_repeats=inference_repeats,
                                     inference_batch=inference_batch, inference_mode=inference_mode,
                                     ensemble_precision=ensemble_precision, device=device, card_class=card_class)
    with class_limits(get_class(facts["name"]), dev):
        out = _run(dev, mode, tft, preset, steps, card_gb, cap_bytes, inference_repeats, inference_batch,
                   ensemble_precision, seed)
    out["card_class"] = facts
    return json_safe(out)


def _run(dev, mode, tft, preset, steps, card_gb, cap_bytes, inference_repeats, inference_batch, ensemble_precision,
         seed) -> dict[str, Any]:
    """measure's run, its parameters checked."""
    is_cuda = dev.type == "cuda"
    # before CUDA starts here: cuBLAS reads its workspace size once (foxlib.memory.cuda.use_cublas_workspace)
    workspace = use_cublas_workspace(tft["cublas_workspace"], dev) if tft.get("cublas_workspace") and is_cuda else None
    order = [n for n in ENSEMBLE if n in MODELS]
    graph_mode = bool(tft.get("cuda_graph")) and is_cuda  # every model captured where it can be (members.py)
    members = [Member(n, tft["config"] if n == "tft" else MODELS[n].preset(preset),
                       tft["precision"] if n == "tft" else ensemble_precision, cuda_graph=graph_mode,
                       options=StepOptions.from_dict(tft.get("options")) if n == "tft" else StepOptions())
               for n in order]
    card = int(round(card_gb * GIB))
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "context_before_warmup": None, "warmup": None, "step_profiles": None,
        "device": describe(dev), "environment": environment(), "order": order, "steps": steps,
        "tft": {k: v for k, v in tft.items() if k not in ("config", "depends_on")},
        "graph_mode": {"asked": True, "on": graph_mode,
                       "why": "wave 8.12 recommended a CUDA-graph strategy: every model's training step and "
                              "inference forward captured where it can be" if graph_mode else
                              "a CUDA graph needs a CUDA device: eager steps"} if tft.get("cuda_graph") else None,
        "cublas_workspace": workspace or None,
        "depends_on": tft["depends_on"],
        "models": {m.name: {"title": m.card.title, "precision": m.precision, "config": dataclasses.asdict(m.cfg),
                            "preset": preset} for m in members},
    }
    units = len(order) * (steps + (0 if is_cuda else 1) + 1) + 1
    with progress(units, "wave 8.13") as bar:
        if is_cuda:
            bar.describe("warming up every library the run uses, then measuring the CUDA context")
            out["context_before_warmup"] = measure_context(dev)
            reader = NvmlProcessReader(dev)  # NVML opened before the context is measured
            try:
                out["warmup"] = warm_up(members, dev, mode, inference_batch, seed)
                out["context"] = measure_context(dev)
                total = torch.cuda.get_device_properties(dev).total_memory
                arith = cap_arithmetic(card, out["context"]["context_bytes"], total, cap_bytes)
                out["cap"] = {**arith, "reserved_at_cap_bytes": torch.cuda.memory_reserved(dev), "enforced": True,
                              "how": f"torch.cuda.set_per_process_memory_fraction({arith['fraction']:.6f}) = cap / "
                                     f"device memory; the CUDA context ({out['context']['how']}, after the warm-up) "
                                     "is outside the cap"}
                torch.cuda.set_per_process_memory_fraction(arith["fraction"], dev)
                sampler = Sampler(reader)
                try:
                    with sampler:
                        sampler.phase = "training"
                        out["training"] = train_cuda(members, steps, dev, seed, bar, sampler)
                        sampler.phase = "inference"
                        out["inference"] = infer(members, dev, mode, inference_repeats, inference_batch, seed,
                                                  arith["cap_bytes"], bar, sampler)
                finally:
                    free_members(members, dev)
                    torch.cuda.set_per_process_memory_fraction(1.0, dev)
                    torch.cuda.empty_cache()
                out["nvml"] = nvml_samples(sampler, reader.note)
                if graph_mode:
                    out["graph_mode"]["training"] = {m.name: m.graph_note for m in members}
                    out["graph_mode"]["inference"] = {m.name: m.inference_note or "eager" for m in members}
            finally:
                reader.close()
        else:
            cap = cap_bytes or card
            out["context"] = None
            out["cap"] = {"card_bytes": card, "context_bytes": 0, "cap_bytes": cap, "fraction": None,
                          "override": bool(cap_bytes),
                          "device_total_bytes": None, "limit_bytes": cap, "enforced": False,
                          "how": f"{NOT_ENFORCED}: the CPU has no allocator cap and no CUDA context; each model's "
                                 "training step measured alone (foxlib.harness.measure_step.measure_model), the interleaved run "
                                 "accounted from those measurements"}
            profiles = {}
            for m in members:
                bar.describe(f"measuring one {m.name} step alone ({m.precision})")
                profiles[m.name] = measure_model(m.name, m.cfg, dev, m.precision, seed)["profile"]
                bar.advance()
            out["step_profiles"] = profiles
            out["nvml"] = {"applicable": False, "note": "not applicable on the CPU: no NVML, no CUDA context",
                           "interval_s": None, "samples": []}
            plan = account_training(profiles, order, steps, cap)
            try:
                out["training"] = train_cpu(members, plan, steps, dev, seed, bar)
                out["inference"] = infer(members, dev, mode, inference_repeats, inference_batch, seed, cap, bar)
            finally:
                free_members(members, dev)
    out["training"]["per_model"] = summarise_steps(out["training"]["steps"], order)
    out["training"]["enforced"] = out["inference"]["enforced"] = is_cuda
    return out
