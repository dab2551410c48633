"""TFTConfig: the hyper-parameters and switches of the Temporal Fusion Transformer
(foxlib/models/tft.py), checked when a config is made; CHECKPOINTING lists the gradient
checkpointing granularities and CHUNKED those that checkpoint the VSNs chunk by chunk on the
folded path (foxlib/models/tft_blocks.py). tests/test_tft.py checks the validation."""
from __future__ import annotations

from dataclasses import dataclass

from foxlib.data.market import N_FEATURES_MAX

CHECKPOINTING = ("none", "vsn", "blocks", "all", "variables", "vsn_variables")
CHUNKED = ("variables", "vsn_variables")  # the modes that checkpoint the VSNs chunk by chunk (folded path)


@dataclass(frozen=True)
class TFTConfig:
    hidden_size: int = 16
    """d: width of every embedding, GRN, LSTM and attention (paper: 160-320)."""
    num_heads: int = 2
    """H attention heads; each has its own Q and K projection d -> d/H (paper: 1 or 4)."""
    n_observed: int = 8
    """Observed past inputs: the first n_observed market features of foxlib.data.market (1..53)."""
    encoder_length: int = 20
    """T_e: past days seen by the encoder LSTM."""
    decoder_length: int = 3
    """T_d: forecast horizon in days (known inputs only)."""
    batch_size: int = 8
    """Windows per training batch."""
    dropout: float = 0.1
    """Dropout rate before every GLU and on the attention weights (paper: 0.1-0.3)."""
    quantiles: tuple[float, ...] = (0.1, 0.5, 0.9)
    """Quantiles predicted at each horizon step; the loss sums their pinball losses (Eq. 24)."""
    lr: float = 1e-3
    """Adam learning rate (paper: 1e-3 for electricity, traffic and retail)."""
    checkpointing: str = "none"
    """Gradient checkpointing (Chen et al. 2016): none, vsn (the VSNs), blocks (every major block), all (the
    whole body), variables (blocks, with the encoder and decoder VSNs in segments of vsn_chunk variables each)
    or vsn_variables (only the encoder and decoder VSNs, in those segments: the rest keeps its activations)."""
    memory_efficient: bool = False
    """Batched per-variable GRNs in chunks of vsn_chunk, folded embeddings, fused SDPA attention (on CPU
    only at dropout 0); same parameters."""
    vsn_chunk: int = 4
    """Variables per chunk of the folded VSN path (memory_efficient or a CHUNKED checkpointing): one
    batched op, or one checkpoint segment, per chunk; 0: all m variables in one chunk. Smaller: lower
    peak, more (smaller) ops. Seed preset, fp32, CPU, "variables": step peak 1.20x the 290 MB floor at 4,
    1.46x at 8, 1.13x at 1 (Adam's step)."""
    vsn_batched: bool = False
    """The VSNs in fewer, larger kernels (memory_efficient only): the selection GRN's folded fc1 and skip as
    one product, each chunk's variable GRNs as one batched product per layer with the residual, norm and
    weighted sum in a few more (tft_blocks.VariableGRNs.fused); and the static covariate encoder's four GRNs
    (one input) as one batched GRN. With vsn_chunk 0 (or >= m) every variable at once: the fewest kernels,
    the largest backward transient; chunking bounds memory. Same function and parameters; the VSNs draw
    dropout as memory_efficient with the same chunks, the static encoder one (4, B, d) mask for four (B, d)."""

    def __post_init__(self):
        object.__setattr__(self, "quantiles", tuple(float(q) for q in self.quantiles))
        if self.checkpointing not in CHECKPOINTING:
            raise ValueError(f"unknown checkpointing {self.checkpointing!r}; valid: {', '.join(CHECKPOINTING)}")
        for name in ("hidden_size", "num_heads", "encoder_length", "decoder_length", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.vsn_chunk < 0:
            raise ValueError(f"vsn_chunk must be at least 1, or 0 for all variables in one chunk, got {self.vsn_chunk}")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}")
        if not 1 <= self.n_observed <= N_FEATURES_MAX:
            raise ValueError(f"n_observed must be in 1..{N_FEATURES_MAX}, got {self.n_observed}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if not self.quantiles or not all(0.0 < q < 1.0 for q in self.quantiles):
            raise ValueError(f"quantiles must be a non-empty tuple of values in (0, 1), got {self.quantiles}")
        if self.lr <= 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        for name in ("memory_efficient", "vsn_batched"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.vsn_batched and not self.memory_efficient:
            raise ValueError("vsn_batched needs memory_efficient=True (it is a form of the folded, batched path)")
