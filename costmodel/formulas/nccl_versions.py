"""Where NCCL's tuning model before 2.26.2 differs from the one transcribed (formulas/nccl_tuner.py), for the
releases from 2.19 on: the versions a measured log or a cluster may have run.

Each difference is in ``src/graph/tuning.cc`` of github.com/NVIDIA/nccl; line numbers cite ``git show
v2.20.3-1:src/graph/tuning.cc``, and each rule names the first release with 2.26.2's (found by reading every
release's file from v2.19.4-1 to v2.26.2-1). Differences that change no time or choice of the collectives
cost4d prices are left out: the tree's bandwidth cap applied to every function, though only all-reduce
runs trees then (:183); the tree latency charged to every function (:254-255); the ring's backup bandwidth
when a function has no algorithm left (:222-224, 325-339), which NCCL_ALGO restricted to one algorithm
never triggers in the collectives priced; and ncclTopoGetAlgoTime's guards (:438-440), equivalent where
the tree runs all-reduce only.
"""

from __future__ import annotations

#: the tuning model cost4d transcribes (nccl_tuner.NCCL_VERSION); later releases are priced with it
TRANSCRIBED = (2, 26, 2)
#: the oldest release whose differences are listed here
OLDEST = (2, 19, 0)

#: from 2.21.5: the ring's LL bandwidth is half the graph's (was a quarter, a third for one node's all-gather,
#: reduce-scatter and broadcast, :181); Hopper has its own llMaxBws row {141, 45, 35} (was Ampere's {87.7,
#: 22.5, 19.0}, :89); NVLS and NVLS-tree take 25 us per NVLink hop (was 23, :69)
LL_HALF = (2, 21, 5)
#: from 2.23.4: a multi-node ring all-reduce crosses the network 2 (N - 1) times (was 2 N, :162); tree Simple's
#: base latency is 8.4 us (was 0, :57) and its hop latency 4 / 4 / 14 us on NVLink / PCI / network (was 28 on
#: each, :67, :71, :75); ring LL128 keeps 0.92 of the bandwidth (was 0.7 with fewer than 2 GPUs per node,
#: :182); PAT exists (no PAT before: nccl_common.h:28); at one GPU per node the network hop takes the tree's
#: latency (was the algorithm's own, :228)
RING_STEPS = (2, 23, 4)
#: from 2.24.3: a cluster of mixed CPU vendors reads the AMD row of llMaxBws (was the Intel row, :145)
MIXED_CPUS = (2, 24, 3)

OLD_LL_MAX_HOPPER = (87.7, 22.5, 19.0)
OLD_NVLS_NVLINK_US = 23.0
OLD_TREE_SIMPLE_BASE_US = 0.0
OLD_TREE_SIMPLE_HW_US = 28.0


def parse(text: str) -> tuple:
    """A release as (major, minor, patch) from '2.20.3', '2.20.3-1' or '2.20.3+cuda12.2'; a ValueError saying
    why if it is none, or older than the releases whose tuner cost4d knows."""
    core = text.strip().split("+")[0].split("-")[0]
    parts = core.split(".")
    if len(parts) != 3 or not all(p.isdigit() and len(p) <= 4 for p in parts):
        raise ValueError(f"NCCL version {text[:40]!r}: give it as major.minor.patch, e.g. 2.20.3")
    version = tuple(int(p) for p in parts)
    if version < OLDEST:
        raise ValueError(f"NCCL {core}: cost4d models NCCL's tuner from {'.'.join(map(str, OLDEST))} on")
    return version
