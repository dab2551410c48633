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
SAME_FUNCTION_FIELDS = {"memory_efficient", "checkpointing", "vsn_chunk"}
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


def best_configuration(option: dict[str, Any] | None, device_short: str, reports_dir: Path,
                       log=lambda msg: None) -> dict[str, Any]:
    """{"precision", "tft_overrides", "source", "depends_on"}: --best, else wave 8.12's recommendation
    (cited: depends_on holds {path, revision, sha256} of the results file read; path relative to the
    repository where it lies in it), else DEFAULT_BEST."""
    from foxlib.core import provenance
    from foxlib.core.results import read_json
    depends_on: list[dict[str, Any]] = []
    if option is not None:
        spec, source = dict(option), "--best option"
    else:
        path = Path(reports_dir) / device_short / "wave-8.12" / "results.json"
        shown = provenance.cite(path, {})["path"] if path.is_file() else str(path)
        res, rec = {}, None
        if path.is_file():
            try:
                res = read_json(path)
                rec = res.get("recommended")
            except ValueError as exc:
                log(f"ignoring {shown}: {exc}")
        if rec and rec.get("precision"):
            spec = {"precision": rec["precision"], **(rec.get("tft_overrides") or {})}
            depends_on.append(provenance.cite(path, res))
            source = f"{depends_on[0]['path']} (recommended strategy: {rec.get('strategy')})"
            if rec.get("cuda_graph") or rec.get("options"):  # this benchmark times eager steps
                source += ("; run here as eager steps with its precision and TFT overrides: its CUDA graph "
                           "and step options are not applied by the peer benchmark")
        else:
            spec, source = dict(DEFAULT_BEST), f"built-in default (no recommendation in {shown})"
    precision = spec.pop("precision", "fp32")
    overrides = dict(spec.pop("tft_overrides", {}) or {})
    overrides.update(spec)  # --best may give the overrides flat, as in DEFAULT_BEST
    return {"precision": precision, "tft_overrides": overrides, "source": source, "depends_on": depends_on}


def foxlib_configs(preset: str, config_overrides: dict[str, Any], best: dict[str, Any]):
    """(card, default config, best config): default is the preset, plain (no checkpointing, no batched GRNs)."""
    from foxlib.models import MODELS
    from foxlib.waves.wave_8_12 import configure
    card = MODELS["tft"]
    base = card.config(preset, **config_overrides)
    default = dataclasses.replace(base, checkpointing="none", memory_efficient=False)
    best_cfg = configure(default, best["tft_overrides"])
    changed = [f for f in SAME_CONFIGURATION_FIELDS if getattr(best_cfg, f) != getattr(default, f)]
    if changed:  # e.g. 8.12's "batch ÷4": a lighter model of another size is not the peer's configuration
        raise SystemExit(f"the best configuration ({best['source']}) changes {', '.join(changed)}: the peer runs the "
                         f"same configuration, so pass --best with precision and memory options only")
    return card, default, best_cfg
