"""The peer benchmark's configurations: foxlib's default TFT and its best one (wave 8.12's
recommendation, cited by path, revision and sha256 through foxlib/core/provenance.py), both at the
configuration the peer is built from.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

DEFAULT_BEST = {"precision": "bf16", "memory_efficient": True, "checkpointing": "blocks"}
# fields of a best configuration that keep the computed function (and the comparison) at equal configuration
SAME_FUNCTION_FIELDS = {"memory_efficient", "checkpointing", "vsn_chunk", "vsn_batched"}
# what the peer and both foxlib variants must share (the peer is built from these)
SAME_CONFIGURATION_FIELDS = ("hidden_size", "num_heads", "n_observed", "encoder_length", "decoder_length",
                             "batch_size", "dropout", "quantiles")


def parse_json_option(text: str | None, what: str) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"{what} is not valid JSON ({exc}): {text!r}") from None
    if not isinstance(value, dict):
        raise SystemExit(f"{what} must be a JSON object, got {text!r}")
    return value


def step_options(value: Any, where: str) -> dict[str, Any]:
    """A best configuration's step options (foxlib.harness.step_options.StepOptions.from_dict, which checks
    them) complete, as a dict of every field; SystemExit naming what is wrong."""
    from foxlib.harness.step_options import StepOptions
    try:
        return StepOptions.from_dict(value).to_dict()
    except ValueError as exc:  # an unknown option or Adam, a switch that is not true or false
        raise SystemExit(f"{where}: {exc}") from None


def _step_fields(spec: dict[str, Any], where: str) -> dict[str, Any]:
    """Pops the step's fields from a best configuration (--best or a recommendation): {"cuda_graph",
    "options", "cublas_workspace"}, checked."""
    cuda_graph = spec.pop("cuda_graph", False)
    if not isinstance(cuda_graph, bool):
        raise SystemExit(f"{where}: cuda_graph must be true or false, got {cuda_graph!r}")
    options = step_options(spec.pop("options", None), where)
    workspace = spec.pop("cublas_workspace", None)
    if workspace is not None and not isinstance(workspace, str):
        raise SystemExit(f"{where}: cublas_workspace must be a CUBLAS_WORKSPACE_CONFIG value such as "
                         f"\":16:8\", got {workspace!r}")
    return {"cuda_graph": cuda_graph, "options": options, "cublas_workspace": workspace or None}


def best_configuration(option: dict[str, Any] | None, device_short: str, reports_dir: Path,
                       log=lambda msg: None) -> dict[str, Any]:
    """{"precision", "tft_overrides", "cuda_graph", "options", "cublas_workspace", "source", "depends_on"}:
    --best, else wave 8.12's recommendation (cited: depends_on holds the Citation of the results file
    read; its path relative to the repository where it lies in it), else DEFAULT_BEST.
    cuda_graph: the whole step as one CUDA graph; options: every StepOptions field (unknown keys:
    SystemExit); cublas_workspace: the CUBLAS_WORKSPACE_CONFIG value the recommendation was measured
    with, or None (recorded, never set here: see workspace_note)."""
    from foxlib.core import provenance
    from foxlib.core.results import read_json
    depends_on: list[provenance.Citation] = []
    if option is not None:
        spec, source = dict(option), "--best option"
    else:
        path = Path(reports_dir) / device_short / "wave-8.12" / "results.json"
        shown = provenance.display_path(path) if path.is_file() else str(path)
        res, rec = {}, None
        if path.is_file():
            try:
                res = read_json(path)
                rec = res.get("recommended")
            except ValueError as exc:
                log(f"ignoring {shown}: {exc}")
        if rec and rec.get("precision"):
            spec = {"precision": rec["precision"], **(rec.get("tft_overrides") or {}),
                    **{k: rec[k] for k in ("cuda_graph", "options", "cublas_workspace") if k in rec}}
            depends_on.append(provenance.cite(path, res))
            source = f"{depends_on[0].path} (recommended strategy: {rec.get('strategy')})"
        else:
            spec, source = dict(DEFAULT_BEST), f"built-in default (no recommendation in {shown})"
    step = _step_fields(spec, source)
    precision = spec.pop("precision", "fp32")
    overrides = dict(spec.pop("tft_overrides", {}) or {})
    overrides.update(spec)  # --best may give the overrides flat, as in DEFAULT_BEST
    if step["cuda_graph"] and precision == "fp16":
        raise SystemExit(f"{source}: fp16 trains through a GradScaler, whose host-side decision is not captured "
                         "in a CUDA graph (foxlib.memory.cuda_graph): use bf16 or fp32 with cuda_graph")
    if step["options"]["optimizer_in_backward"] and precision == "fp16":
        raise SystemExit(f"{source}: Adam in backward cannot run with fp16's GradScaler (use bf16 or fp32)")
    return {"precision": precision, "tft_overrides": overrides, **step, "source": source, "depends_on": depends_on}


def workspace_note(best: dict[str, Any], environ) -> str | None:
    """What the run did with the recommendation's cuBLAS workspace (None when it names none): the
    benchmark never sets CUBLAS_WORKSPACE_CONFIG (it acts only before CUDA starts); it is applied only
    where the process was started with that very value."""
    wanted = best.get("cublas_workspace")
    if not wanted:
        return None
    have = environ.get("CUBLAS_WORKSPACE_CONFIG")
    if have == wanted:
        return (f"The best configuration's cuBLAS workspace (CUBLAS_WORKSPACE_CONFIG={wanted}) is applied: this "
                "process was started with it.")
    now = f"CUBLAS_WORKSPACE_CONFIG={have}" if have else "CUBLAS_WORKSPACE_CONFIG unset: cuBLAS's default"
    return (f"The best configuration was measured with CUBLAS_WORKSPACE_CONFIG={wanted}; the peer benchmark does not "
            f"set it and runs with this process's cuBLAS workspace as it is ({now}). Start the benchmark with "
            f"CUBLAS_WORKSPACE_CONFIG={wanted} to apply it.")


def foxlib_configs(preset: str, config_overrides: dict[str, Any], best: dict[str, Any]):
    """(card, default config, best config): default is the preset, plain (no checkpointing, no batched GRNs)."""
    from foxlib.models import MODELS
    from foxlib.waves.wave_8_12.strategies import configure
    card = MODELS["tft"]
    base = card.config(preset, **config_overrides)
    default = dataclasses.replace(base, checkpointing="none", memory_efficient=False)
    best_cfg = configure(default, best["tft_overrides"])
    changed = [f for f in SAME_CONFIGURATION_FIELDS if getattr(best_cfg, f) != getattr(default, f)]
    if changed:  # e.g. 8.12's "batch ÷4": a lighter model of another size is not the peer's configuration
        raise SystemExit(f"the best configuration ({best['source']}) changes {', '.join(changed)}: the peer runs the "
                         f"same configuration, so pass --best with precision and memory options only")
    return card, default, best_cfg
