"""Wave 8.11: mixed precision — the memory and speed it buys, the accuracy it costs, all measured.

The seed expected fp16 to take the TFT from 3,096 MB to 1,548 MB (50 %), "+20 % faster" and
"< 2 % loss". Here every model is re-profiled in each precision, the TFT's step is timed with
the precisions alternating in one run, and the TFT is trained to a fixed budget of steps with
early stopping, several seeds per precision, and scored on held-out windows. The accuracy gate has
power only if fp32 beats the naive forecast (climatology, foxlib.harness.training) by the harness's margin:
that is checked first, and the comparison counts only the seeds whose fp32 run has that skill.

measuring.py measures; records.py types its data; analysis.py decides on raw values; tables.py only formats.
"""
