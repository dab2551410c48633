"""The benchmark's other peers: neuralforecast's TFT and darts' TFTModel (skip_interpolation off and on),
built at foxlib's configuration and at their own defaults, on the windows pytorch-forecasting's peer gets.

Each is its library's plain torch module, outside any Lightning Trainer: neuralforecast's `TFT` (a
LightningModule whose forward takes the `windows_batch` dict its training_step builds) and darts'
`_TFTModule` (built by `TFTModel._create_model` from one training sample's shapes, its forward taking the
`PLModuleInput` its training_step builds). The timed step is what each training_step back-propagates:
forward + the library's loss, then backward and Adam (foxlib.memory.step.TrainingStep).

Inputs: the pytorch-forecasting batch `(x, y)` of benchmarks/peer/data.py (the same windows as foxlib's,
checked equal), re-laid for each library, so the three peers see the same numbers: the past target, the
`n_observed` observed reals (past only), the 5 known reals (4 calendar features + relative_time_idx, past
and future), the series id, the next-day return as target.

Used by benchmarks/peer_tft.py; building a peer needs its library (requirements-peer-nodeps.txt).
"""
from __future__ import annotations

import importlib.util
import logging
import warnings
from typing import Any

from benchmarks.peer.data import CALENDAR

NF, DARTS = "neuralforecast", "darts"
# row -> (library, at foxlib's configuration?, darts' skip_interpolation)
ROWS = {
    "nf": (NF, True, None),
    "nf_defaults": (NF, False, None),
    "darts": (DARTS, True, False),
    "darts_skip": (DARTS, True, True),
    "darts_defaults": (DARTS, False, False),
    "darts_defaults_skip": (DARTS, False, True),
}
KNOWN = (*CALENDAR, "relative_time_idx")  # the 5 known reals, in pytorch-forecasting's order


def missing(library: str) -> str | None:
    """Why a library's rows cannot run here (None: they can)."""
    if importlib.util.find_spec(library) is None:
        return (f"not run: {library} is not installed here (the peer environment's requirements-peer-nodeps.txt; "
                f"on a GPU machine, its wheels in .whl/)")
    try:
        if library == NF:
            nf_tft()
        else:
            from darts.models.forecasting.tft_model import TFTModel  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - an import that fails for want of a dependency: said on the page
        return f"not run: {library} does not import here ({type(exc).__name__}: {exc})"
    return None


def nf_tft():
    """neuralforecast's TFT class and its MQLoss, imported without running neuralforecast/__init__.py.

    That __init__ imports the library's orchestration (neuralforecast.core, the NeuralForecast class and its
    Auto* models), which imports ray and through it pyarrow and pydantic: about 136 MB of wheels that the TFT
    module never uses, more than a GPU machine without internet can be given. The package is registered with
    its real path and spec but without running its __init__, and then its own models.tft and losses.pytorch
    modules are imported as they are: the TFT's code is the library's, unchanged (they import torch,
    pytorch_lightning, utilsforecast and safetensors)."""
    import importlib
    import sys
    import types
    if NF not in sys.modules:
        spec = importlib.util.find_spec(NF)
        package = types.ModuleType(NF)
        package.__path__, package.__spec__, package.__file__ = list(spec.submodule_search_locations), spec, spec.origin
        sys.modules[NF] = package
    return (importlib.import_module("neuralforecast.models.tft").TFT,
            importlib.import_module("neuralforecast.losses.pytorch").MQLoss)


def version(library: str) -> str | None:
    try:
        from importlib.metadata import version as v
        return v(library)
    except Exception:  # noqa: BLE001 - informational
        return None


def _columns(ds) -> tuple[list[int], list[int]]:
    """Indices of the known and the observed reals in pytorch-forecasting's x["encoder_cont"]."""
    idx = {name: i for i, name in enumerate(ds.reals)}
    known = [idx[n] for n in KNOWN]
    observed = [i for n, i in idx.items() if n not in KNOWN]
    return known, observed


def batch(library: str, ds, peer_batch) -> dict[str, Any]:
    """The library's batch for the windows of pytorch-forecasting's `(x, y)`: a dict of tensors."""
    import torch
    x, y = peer_batch
    known, observed = _columns(ds)
    series = x["encoder_cat"][:, 0, 0].float()  # the series code (0, 1), constant over the window
    target = y[0].float().unsqueeze(-1)  # [B, Td, 1]
    past_target = x["encoder_target"].float().unsqueeze(-1)  # [B, Te, 1]
    if library == NF:
        return {"insample_y": past_target, "insample_mask": torch.ones_like(past_target),
                "futr_exog": torch.cat([x["encoder_cont"][..., known], x["decoder_cont"][..., known]], dim=1),
                "hist_exog": x["encoder_cont"][..., observed], "stat_exog": series.unsqueeze(-1),
                "outsample_y": target, "outsample_mask": torch.ones_like(target)}
    return {"past_target": past_target, "past_covariates": x["encoder_cont"][..., observed],
            "historic_future_covariates": x["encoder_cont"][..., known],
            "future_covariates": x["decoder_cont"][..., known],
            "static_covariates": series.view(-1, 1, 1), "future_target": target}


def build(name: str, ds, cfg, seed: int):
    """The row's torch module (CPU, train mode)."""
    library, same, skip = ROWS[name]
    logging.getLogger("lightning.fabric.utilities.seed").setLevel(logging.WARNING)
    logging.getLogger("lightning_fabric.utilities.seed").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = _build_nf(ds, cfg, same, seed) if library == NF else _build_darts(ds, cfg, same, skip, seed)
    return model.train()


def _build_nf(ds, cfg, same: bool, seed: int):
    TFT, MQLoss = nf_tft()  # noqa: N806 - the library's class names
    _, observed = _columns(ds)
    names = list(ds.reals)
    data = {"h": cfg.decoder_length, "input_size": cfg.encoder_length, "stat_exog_list": ["series"],
            "hist_exog_list": [names[i] for i in observed], "futr_exog_list": list(KNOWN), "random_seed": seed}
    if not same:  # its defaults: hidden_size 128, 4 heads, dropout 0.1, no attention dropout, MAE (one output)
        return TFT(**data)
    return TFT(**data, hidden_size=cfg.hidden_size, n_head=cfg.num_heads, dropout=cfg.dropout,
               attn_dropout=cfg.dropout, n_rnn_layers=1, loss=MQLoss(quantiles=list(cfg.quantiles)),
               scaler_type="identity", learning_rate=cfg.lr)


def _build_darts(ds, cfg, same: bool, skip: bool, seed: int):
    import numpy as np
    from darts.models.forecasting.tft_model import TFTModel
    from darts.utils.data.torch_datasets.utils import TorchTrainingSample
    from darts.utils.likelihood_models.torch import QuantileRegression
    _, observed = _columns(ds)
    te, td = cfg.encoder_length, cfg.decoder_length
    common = {"input_chunk_length": te, "output_chunk_length": td, "skip_interpolation": skip,
              "random_state": seed}
    if same:
        model = TFTModel(**common, hidden_size=cfg.hidden_size, lstm_layers=1, num_attention_heads=cfg.num_heads,
                         dropout=cfg.dropout, hidden_continuous_size=cfg.hidden_size,
                         categorical_embedding_sizes={0: (2, cfg.hidden_size)},  # static column 0: the series id
                         likelihood=QuantileRegression(list(cfg.quantiles)), optimizer_kwargs={"lr": cfg.lr})
    else:  # its defaults: hidden_size 16, 4 heads, dropout 0.1, hidden_continuous_size 8, 17 quantiles,
        model = TFTModel(**common)  # the series id a numeric static covariate
    z = np.zeros
    sample = TorchTrainingSample(  # one window's shapes: what TFTModel.fit hands _create_model
        past_target=z((te, 1), np.float32), past_covariates=z((te, len(observed)), np.float32),
        historic_future_covariates=z((te, len(KNOWN)), np.float32),
        future_covariates=z((td, len(KNOWN)), np.float32), static_covariates=z((1, 1), np.float32),
        future_target=z((td, 1), np.float32))
    return model._create_model(sample)


def loss_fn(library: str):
    """What the library's training_step back-propagates, as loss_fn(model, batch)."""
    if library == NF:
        def nf_loss(model, b):
            wb = {k: b[k] for k in ("insample_y", "insample_mask", "futr_exog", "hist_exog", "stat_exog")}
            y_hat = model.loss.domain_map(model(wb))
            return model.loss(y=b["outsample_y"], y_hat=y_hat, y_insample=b["insample_y"], mask=b["outsample_mask"])
        return nf_loss

    from darts.utils.data.torch_datasets.utils import ModuleStage, PLModuleInput

    def darts_loss(model, b):
        x = PLModuleInput(**{k: v for k, v in b.items() if k != "future_target"}, stage=ModuleStage.TRAIN)
        return model._compute_loss(model(x), b["future_target"], model.train_criterion, None)
    return darts_loss


def trainable(model):
    """The parameters Adam updates (neuralforecast's MQLoss holds its quantiles as a frozen Parameter)."""
    return [p for p in model.parameters() if p.requires_grad]


def architecture(name: str, model) -> dict[str, Any]:
    """The few facts of the built module the page quotes."""
    library, same, skip = ROWS[name]
    if library == NF:
        h = model.hparams
        return {"library": library, "hidden_size": h.hidden_size, "n_head": h.n_head, "dropout": h.dropout,
                "attn_dropout": h.attn_dropout, "outputs": model.loss.outputsize_multiplier,
                "loss": type(model.loss).__name__, "historic_variables": model.futr_exog_size + model.hist_exog_size + 1,
                "future_variables": model.futr_exog_size, "static_variables": model.stat_exog_size}
    return {"library": library, "hidden_size": model.hidden_size, "heads": model.num_attention_heads,
            "dropout": model.dropout, "hidden_continuous_size": model.hidden_continuous_size,
            "skip_interpolation": model.skip_interpolation, "outputs": model.loss_size,
            "encoder_variables": len(model.encoder_variables), "decoder_variables": len(model.decoder_variables),
            "static_categorical": bool(model.categorical_embedding_sizes),
            "full_attention": model.full_attention}


def notes(chosen: list[str]) -> list[str]:
    """What the other peers' rows share with foxlib's configuration, what they cannot, and what was timed."""
    out = []
    if any(ROWS[n][0] == NF for n in chosen if n in ROWS):
        out.append(
            "neuralforecast's TFT (models.TFT, its LightningModule used as a plain torch module): the timed step is "
            "its forward on the windows_batch its training_step builds, its loss's domain_map and loss (MQLoss at "
            "foxlib's quantiles, same-configuration row), backward and Adam; its window sampling and per-window "
            "scaler are data preparation and are not timed (scaler_type 'identity' at foxlib's configuration: the "
            "features are already standardised; its default 'robust' would rescale the same windows). Same "
            "configuration: hidden_size d, n_head, dropout and attn_dropout = foxlib's dropout, one LSTM layer, "
            "ELU GRNs, the same windows and variables. Cannot be matched: it always feeds the past target as one "
            "more historic variable (foxlib and pytorch-forecasting do not); it has no static categorical input on "
            "this path, so the series id is a static real (0 or 1) through its per-variable linear embedding "
            "(two distinct vectors, as a 2-row embedding); its VSNs see the known reals and the target through "
            "one embedding per variable (a Linear(1, d) each, as foxlib's). At its defaults: hidden_size 128, 4 "
            "heads, dropout 0.1, no attention dropout, MAE loss (one output instead of the quantiles); the "
            "windows, batch and variables stay foxlib's (its own default batch is 1,024 windows).")
    if any(ROWS[n][0] == DARTS for n in chosen if n in ROWS):
        out.append(
            "darts' TFTModel (its _TFTModule, built by TFTModel._create_model from one training sample's shapes, "
            "used as a plain torch module): the timed step is its forward on the PLModuleInput its training_step "
            "builds (stage train), its likelihood's loss (QuantileRegression), backward and Adam. "
            "skip_interpolation (TFTModel's own argument of that name in darts 0.48.1, passed to its variable "
            "selection networks): off = pytorch-forecasting's interpolated residual in the VSNs, on = a linear "
            "projection instead. Same configuration: hidden_size and hidden_continuous_size d, the heads, dropout, "
            "one LSTM layer, QuantileRegression at foxlib's quantiles, the series id as a categorical static "
            "covariate embedded at width d, the 5 known reals (relative_time_idx included, add_relative_index "
            "off) as future covariates, the observed reals as past covariates. Cannot be matched: it always feeds "
            "the past target as one more encoder variable; queries attend from the decoder steps only "
            "(full_attention off, its default, as pytorch-forecasting); its architecture follows "
            "pytorch-forecasting's (the same notes apply). At its defaults: hidden_size 16, 4 heads, dropout 0.1, "
            "hidden_continuous_size 8, 17 quantiles (0.01 ... 0.99), the series id a numeric static covariate; "
            "the windows, batch and variables stay foxlib's.")
    return out
