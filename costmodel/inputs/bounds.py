"""Sanity bounds on every number a user or a file gives cost4d.

Wide enough for any run people train today (and a few orders of magnitude beyond), narrow enough
that every product the formulas form stays a finite float64 (at most ~1e100 for any total).
Messages quote the bound that failed.
"""

#: devices along one axis, or in a whole mesh
DEVICES = 2**24
#: tokens one replica holds, or a batch
TOKENS = 2**40
#: widths in elements (hidden, MLP hidden, head dim)
WIDTH = 2**24
#: transformer blocks
LAYERS = 2**20
#: attention heads
HEADS = 2**20
#: experts of one MoE layer
EXPERTS = 2**20
#: vocabulary entries
VOCAB = 2**31
#: sequence length and positions (tokens)
SEQUENCE = 2**34
#: micro-batches, chunks, accumulation steps, iterations
STEPS = 2**24
#: FLOP/s of one device: from a slow CPU core to far beyond any accelerator
FLOPS = (1e6, 1e19)
#: bytes per second of one link or memory
BANDWIDTH = (1e3, 1e16)
#: bytes of one measured message (a collective's buffer in a log or results file)
MESSAGE = 2**50
#: bytes per second a measured row may state (algbw, busbw)
RATE = BANDWIDTH[1] * 1e3
#: bytes of one device's memory (a limit below 1 MB is a typo: a unit left out)
MEMORY = (1e6, 2.0**60)
#: seconds of one modelled operation (a latency may be 0)
SECONDS = (0.0, 1e6)
#: seconds of one measured operation: nothing on a GPU takes less than a nanosecond
MEASURED = (1e-9, 1e6)
#: how deep a spec or results file may nest (real ones nest 3 levels)
DEPTH = 16
#: characters of a name (model, device, level, run)
NAME = 200
