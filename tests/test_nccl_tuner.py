"""costmodel.formulas.nccl_tuner against values worked by hand from NCCL v2.26.2-1's C code.

Every expected number below is arithmetic on the constants of src/graph/tuning.cc (line numbers in
the comments) and the graph values of H100_1NODE / H100_2NODES, not a call into the module.
Tolerance 1e-9 relative: both sides are double arithmetic on the same constants (NCCL itself keeps
the tables in float32, which the module does not imitate).
"""

from dataclasses import replace
from pathlib import Path

import pytest

from costmodel.formulas import nccl_p2p as p2p
from costmodel.formulas import nccl_tuner as nt
from costmodel.formulas.nccl_topologies import H100_1NODE, H100_2NODES
from costmodel.formulas.nccl_tuner import Graph

ONE, TWO = H100_1NODE, H100_2NODES
NO_NVLS = replace(ONE, nvls=Graph(), nvls_support=False, nvls_channels=0)  # NCCL_NVLS_ENABLE=0
RING_ONLY = replace(NO_NVLS, algorithms_env=frozenset({"ring"}))  # + NCCL_ALGO=RING (the *_ring.out runs)
MiB, GiB = 2**20, 2**30


def lat(topo, coll, algo, proto):
    return nt.latency_us(coll=coll, algo=algo, proto=proto, topo=topo)


def bw(topo, coll, algo, proto):
    return nt.tuned_bandwidth_gbs(coll=coll, algo=algo, proto=proto, topo=topo)


def time_us(topo, coll, algo, proto, n_bytes):
    return nt.algo_time_us(coll=coll, algo=algo, proto=proto, n_bytes=n_bytes, topo=topo)


# (case, value, expected, where in v2.26.2)
AR, AG = "all_reduce", "all_gather"
CASES = [
    # --- one node, 8 ranks: latencies, tuning.cc:298-329 (nsteps = 2 x 7 = 14 for all-reduce)
    ("ring AR LL lat: 6.6 + 14 x 0.6",
     lambda: lat(ONE, AR, "ring", "LL"), 15.0, "tuning.cc:121,131,324"),
    ("ring AR LL128 lat: 14 + 14 x 1.9",
     lambda: lat(ONE, AR, "ring", "LL128"), 40.6, "tuning.cc:121,131,324"),
    ("ring AR Simple lat: 8.4 + 14 x 3.4",
     lambda: lat(ONE, AR, "ring", "Simple"), 56.0, "tuning.cc:121,131,324"),
    ("tree AR Simple lat: 8.4 + 2 (7 x 4.0 + log2(1) x 14)",
     lambda: lat(ONE, AR, "tree", "Simple"), 64.4, "tuning.cc:121,131,328-329"),
    ("NVLS AR lat: intraLat 25 (assigned, not added to baseLat)",
     lambda: lat(ONE, AR, "nvls", "Simple"), 25.0, "tuning.cc:133,337"),
    ("ring AG LL lat: 6.6 + 7 x 0.6",
     lambda: lat(ONE, AG, "ring", "LL"), 10.8, "tuning.cc:235,324"),
    # --- one node: bandwidths, tuning.cc:253-296 (12 ring channels x 30 GB/s = 360)
    ("ring AR LL bw: min(llMaxBw 141, 360 x .5) x 8/14",
     lambda: bw(ONE, AR, "ring", "LL"), 141.0 * 8 / 14, "tuning.cc:154,256,292"),
    ("ring AR LL128 bw: min(360 x .92, 12 x 36.7) x 8/14",
     lambda: bw(ONE, AR, "ring", "LL128"), 331.2 * 8 / 14, "tuning.cc:161,257,292"),
    ("ring AR Simple bw: 360 x 8/14",
     lambda: bw(ONE, AR, "ring", "Simple"), 360 * 8 / 14, "tuning.cc:292"),
    ("tree AR LL128 bw: min(min(331.2, 12 x 38.7) x 7/9, 12 x 36.7) x .5",
     lambda: bw(ONE, AR, "tree", "LL128"), 257.6 * 0.5, "tuning.cc:167,173,258,260,294"),
    ("tree AR LL bw: min(331.2 / 3.8, 141) x .5",
     lambda: bw(ONE, AR, "tree", "LL"), 331.2 / 3.8 * 0.5, "tuning.cc:259,294"),
    ("NVLS AR bw: 8 x min(40, 60) x 5/6",
     lambda: bw(ONE, AR, "nvls", "Simple"), 320 * 5 / 6, "tuning.cc:251,293"),
    ("NVLS AG bw: 8 x 40, no bus-to-algo ratio",
     lambda: bw(ONE, AG, "nvls", "Simple"), 320.0, "tuning.cc:290"),
    ("ring AG Simple bw: 360 x 8/7",
     lambda: bw(ONE, AG, "ring", "Simple"), 360 * 8 / 7, "tuning.cc:292"),
    ("NVLS tree off on one node",
     lambda: bw(ONE, AR, "nvls_tree", "Simple"), 0.0, "tuning.cc:412"),
    ("NVLS LL not modelled",
     lambda: bw(ONE, AR, "nvls", "LL"), 0.0, "tuning.cc:246"),
    ("PAT off at 8 GPUs per node",
     lambda: bw(ONE, AG, "pat", "Simple"), 0.0, "tuning.cc:182,248"),
    # --- one node: times, tuning.cc:530-547
    ("NVLS AR 4 GiB: 25 + 2^32 / (1000 x 266.67)",
     lambda: time_us(ONE, AR, "nvls", "Simple", 4 * GiB), 25 + 4 * GiB / (1000 * 320 * 5 / 6), "tuning.cc:545"),
    ("tree AR LL128 1 MiB: 31.5 + 2^20 / (1000 x 128.8 x factor[LL128][14] .6)",
     lambda: time_us(ONE, AR, "tree", "LL128", MiB), 31.5 + MiB / (1000 * 128.8 * 0.6), "tuning.cc:526,538"),
    ("ring AR LL 1 MiB: 15 + 2^20 / (1000 x 80.57)",
     lambda: time_us(ONE, AR, "ring", "LL", MiB), 15.0 + MiB / (1000 * 141.0 * 8 / 14), "tuning.cc:545"),
    # --- two nodes, 16 ranks: nsteps 30, 2 inter-node steps; Intel x86 netOverhead 1 us (x3 Simple)
    ("2N ring AR LL lat: 6.6 + 28 max(.6, 1) + 2 x 2.7",
     lambda: lat(TWO, AR, "ring", "LL"), 40.0, "tuning.cc:139,192,316-324"),
    ("2N ring AR Simple lat: 8.4 + 28 max(3.4, 3) + 2 x 14",
     lambda: lat(TWO, AR, "ring", "Simple"), 131.6, "tuning.cc:139,320-324"),
    ("2N tree AR LL lat: 6.8 + 2 (7 x .6 + 1 x 5.0)",
     lambda: lat(TWO, AR, "tree", "LL"), 25.2, "tuning.cc:139,328-329"),
    ("2N NVLS tree lat: 25 + 2 x log2(2) x 14",
     lambda: lat(TWO, AR, "nvls_tree", "Simple"), 53.0, "tuning.cc:133,141,340"),
    ("2N broadcast Simple lat, sameChannels=0: 8.4 + 16 x NET tree 14",
     lambda: lat(TWO, "broadcast", "ring", "Simple"), 232.4, "tuning.cc:311-313"),
    ("2N ring AR LL bw: min(llMaxBws[Intel][N2] 39, 384 x .5) x 16/30",
     lambda: bw(TWO, AR, "ring", "LL"), 39.0 * 16 / 30, "tuning.cc:152,220,256"),
    ("2N tree AR LL128 bw: min(min(353.28, 8 x 41.4) x 120/128, 8 x 36.7) x .85 x .5",
     lambda: bw(TWO, AR, "tree", "LL128"), 293.6 * 0.85 * 0.5, "tuning.cc:167,173,258-261"),
    ("2N NVLS tree bw: 8 x min(40, 48) x 5/6",
     lambda: bw(TWO, AR, "nvls_tree", "Simple"), 320 * 5 / 6, "tuning.cc:252,293"),
    ("2N NVLS off without CollNet",
     lambda: bw(TWO, AR, "nvls", "Simple"), 0.0, "tuning.cc:414-417"),
    ("2N ring AR Simple 256 MiB, plateau x1.4: 131.6 x 1.4 + 2^28 / (1000 x 204.8)",
     lambda: time_us(TWO, AR, "ring", "Simple", 256 * MiB), 131.6 * 1.4 + 256 * MiB / (1000 * 204.8),
     "tuning.cc:539-541"),
    ("2N ring AR Simple 16383 B, S/(16 x 16) = 63 < 64: no plateau",
     lambda: time_us(TWO, AR, "ring", "Simple", 16383), 131.6 + 16383 / (1000 * 204.8), "tuning.cc:540"),
    # --- helpers
    ("log2i(0) = -1",
     lambda: nt.log2i(0), -1, "bitops.h:131-132"),
    ("tree factor Simple, 63 B -> log2i(0): none",
     lambda: nt.tree_correction_factor(proto="Simple", n_bytes=63), 1.0, "tuning.cc:537-538"),
    ("tree factor Simple, 256 MiB -> index 22",
     lambda: nt.tree_correction_factor(proto="Simple", n_bytes=256 * MiB), 0.9, "tuning.cc:527"),
    ("tree factor Simple, 512 MiB -> index 23: none",
     lambda: nt.tree_correction_factor(proto="Simple", n_bytes=512 * MiB), 1.0, "tuning.cc:538"),
    ("p2p LL up to 32 ch x 16 KiB",
     lambda: p2p.p2p_protocol(n_bytes=32 * 16384, n_channels_max=32), "LL", "enqueue.cc:779,792"),
    ("p2p Simple above",
     lambda: p2p.p2p_protocol(n_bytes=32 * 16384 + 1, n_channels_max=32), "Simple", "enqueue.cc:792"),
    ("p2p 256 MiB on one node: 4 -> 8 -> 16 channels until parts <= 16 MiB",
     lambda: p2p.p2p_op_channels(n_bytes=256 * MiB, n_channels_min=4, n_channels_max=32,
                                step_bytes=512 * 1024, n_nodes=1), 16, "enqueue.cc:848-858"),
]


@pytest.mark.parametrize("case, value, expected, where", CASES, ids=[c[0] for c in CASES])
def test_hand_computed(case, value, expected, where):
    got = value()
    if isinstance(expected, str):
        assert got == expected
    else:
        assert got == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_choice_one_node_default_is_ring_ll_then_nvls():
    """NVLS on (multicast): ring LL up to 1 MiB, NVLS/Simple from 2 MiB (NVLS: 25 us, 266.7 GB/s beats
    ring LL at 15 us, 80.6 GB/s once S > 10 / (1/80571 - 1/266667) us ~ 1.16 MB); LL128 never wins."""
    assert nt.choose("all_reduce", MiB, ONE)[:2] == ("ring", "LL")
    for size in (2 * MiB, 16 * MiB, 256 * MiB, 4 * GiB):
        assert nt.choose("all_reduce", size, ONE)[:2] == ("nvls", "Simple")


def test_choice_without_nvls_goes_ll_ll128_simple():
    """NVLS off: ring LL -> LL128 at 15 + S/80571 = 40.6 + S/189257 (S ~ 3.6 MB) -> Simple at
    40.6 + S/189257 = 56 + S/205714 (S ~ 36.4 MB); tree never wins (tuning.cc:524-528 slows it)."""
    expected = {2 * MiB: "LL", 4 * MiB: "LL128", 32 * MiB: "LL128", 64 * MiB: "Simple", 4 * GiB: "Simple"}
    for topo in (NO_NVLS, RING_ONLY):
        chosen = {s: nt.choose("all_reduce", s, topo)[:2] for s in expected}
        assert chosen == {s: ("ring", p) for s, p in expected.items()}
    order = [nt.PROTOCOLS.index(nt.choose("all_reduce", 2**k, NO_NVLS)[1]) for k in range(3, 34)]
    assert order == sorted(order)  # protocols only move LL -> LL128 -> Simple as the size grows


def test_choice_all_gather_one_node_keeps_ring():
    """All-gather: ring LL (10.8 us) < NVLS (25 us) at 4 MiB, ring LL128 (27.3 us, 378.5 GB/s) wins at
    8 MiB: 27.3 + 22.16 < 25 + 26.21; ring Simple from 32 MiB."""
    assert nt.choose("all_gather", 4 * MiB, ONE)[:2] == ("ring", "LL")
    assert nt.choose("all_gather", 8 * MiB, ONE)[:2] == ("ring", "LL128")
    assert nt.choose("reduce_scatter", 32 * MiB, ONE)[:2] == ("ring", "Simple")


def test_choice_two_nodes():
    """Two nodes: tree LL (25.2 us) for small sizes, NVLS tree (53 us, 266.7 GB/s) for large all-reduce."""
    assert nt.choose("all_reduce", 8, TWO)[:2] == ("tree", "LL")
    assert nt.choose("all_reduce", 4 * GiB, TWO)[:2] == ("nvls_tree", "Simple")
    assert not nt.is_candidate(coll="all_gather", algo="nvls", topo=TWO)  # enqueue.cc:1671


def test_choose_returns_seconds():
    algo, proto, seconds = nt.choose("all_reduce", 4 * GiB, ONE)
    assert seconds == pytest.approx((25 + 4 * GiB / (1000 * 320 * 5 / 6)) * 1e-6, rel=1e-9)


def test_one_rank_is_free():
    solo = replace(ONE, n_ranks=1)
    assert nt.choose("all_reduce", MiB, solo) == ("ring", "Simple", 0.0)  # enqueue.cc:1660-1663


def test_ll128_gates():
    """LL128 off when typeIntra > NVB (tuning.cc:430), on again when NCCL_PROTO lists it (protoEnable 1)."""
    pci = replace(ONE, ring=replace(ONE.ring, type_intra=nt.PATH_PIX))
    assert bw(pci, "all_reduce", "ring", "LL128") == 0.0
    forced = replace(pci, protocols_env=frozenset({"LL128"}))
    assert bw(forced, "all_reduce", "ring", "LL128") > 0
    assert bw(forced, "all_reduce", "ring", "Simple") == 0.0


MEASURED = Path(__file__).resolve().parents[1] / "hardware/measured/h100-8gpu-together-nccl-tests"


def _measured_us(name, size):
    for line in (MEASURED / name).read_text().splitlines():
        fields = line.split()
        if fields and not line.startswith("#") and int(fields[0]) == size:
            return float(fields[5])  # out-of-place time (us)
    raise KeyError(size)


@pytest.mark.parametrize("coll, topo, name", [
    ("all_reduce", RING_ONLY, "all_reduce_ring.out"), ("all_gather", RING_ONLY, "all_gather_ring.out"),
    ("reduce_scatter", RING_ONLY, "reduce_scatter_ring.out"), ("all_reduce", ONE, "all_reduce_nvls.out"),
])
@pytest.mark.parametrize("size", [256 * MiB, 4 * GiB])
def test_large_sizes_near_measured(coll, topo, name, size):
    """NCCL's estimate vs nccl-tests on 8 x H100 (NCCL 2.26.2): within 10% at >= 256 MiB, where
    latency and the one-process launch floor (~35 us in these logs) no longer matter. The tuner is a
    ranking heuristic, not a timer, so 10% is its accuracy, not rounding."""
    assert nt.choose(coll, size, topo)[2] * 1e6 == pytest.approx(_measured_us(name, size), rel=0.10)


# --- A100 presets: hand arithmetic on tuning.cc's constants and the A100_* graph values ---
from costmodel.formulas.nccl_topologies import A100_1NODE, A100_2NODES_EFA4, A100_2NODES_IB  # noqa: E402

A1, AIB, AEFA = A100_1NODE, A100_2NODES_IB, A100_2NODES_EFA4
A100_CASES = [
    # one node: ring 12 x 20 = 240, Ampere N1 llMaxBw 87.7, perChMaxRingLL128 20, perChMaxTree 24
    ("A1 ring AR LL bw: min(87.7, 240 x .5) x 8/14",
     lambda: bw(A1, AR, "ring", "LL"), 87.7 * 8 / 14, "tuning.cc:153,256,292"),
    ("A1 ring AR LL128 bw: min(240 x .92, 12 x 20) x 8/14",
     lambda: bw(A1, AR, "ring", "LL128"), 220.8 * 8 / 14, "tuning.cc:160,257,292"),
    ("A1 tree AR Simple bw: min(220.8, 12 x 24) x .5",
     lambda: bw(A1, AR, "tree", "Simple"), 220.8 * 0.5, "tuning.cc:172,258,294"),
    ("A1 tree AR LL128 bw: min(220.8 x 7/9, 12 x 20) x .5",
     lambda: bw(A1, AR, "tree", "LL128"), 220.8 * 7 / 9 * 0.5, "tuning.cc:166,260,294"),
    ("A1 ring AR Simple lat: 8.4 + 14 x 3.4",
     lambda: lat(A1, AR, "ring", "Simple"), 56.0, "tuning.cc:121,131,324"),
    ("A1 NVLS off on SM80",
     lambda: bw(A1, AR, "nvls", "Simple"), 0.0, "nvls.cc:168, search.cc:973"),
    ("A1 ring AG LL 1 MiB: 10.8 + 2^20 / (1000 x 87.7 x 8/7)",
     lambda: time_us(A1, AG, "ring", "LL", MiB), 10.8 + MiB / (1000 * 87.7 * 8 / 7), "tuning.cc:545"),
    # two DGX A100 over IB: AMD netOverhead 2 us, llMaxBw[AMD][N2] 22.5, latencyInter 0
    ("AIB ring AR LL lat: 6.6 + 28 max(.6, 2) + 2 x 2.7",
     lambda: lat(AIB, AR, "ring", "LL"), 68.0, "tuning.cc:139,193,316-324"),
    ("AIB ring AR Simple lat: 8.4 + 28 max(3.4, 6) + 2 x 14",
     lambda: lat(AIB, AR, "ring", "Simple"), 204.4, "tuning.cc:139,320-324"),
    ("AIB tree AR LL128 lat: 14 + 2 (7 x 1.25 + 8.5)",
     lambda: lat(AIB, AR, "tree", "LL128"), 48.5, "tuning.cc:122,131,139,328-329"),
    ("AIB ring AR LL bw: min(22.5, 192 x .5) x 16/30",
     lambda: bw(AIB, AR, "ring", "LL"), 12.0, "tuning.cc:153,220,256"),
    ("AIB tree AR Simple bw: tree bwIntra 30: min(240 x .92, 8 x 23.6) x .5",
     lambda: bw(AIB, AR, "tree", "Simple"), 188.8 * 0.5, "tuning.cc:172,250,258"),
    ("AIB tree AR LL128 bw: min(188.8 x 120/128, 8 x 20) x .5",
     lambda: bw(AIB, AR, "tree", "LL128"), 80.0, "tuning.cc:166,260"),
    ("AIB ring AR Simple 1 GiB: 204.4 x 1.4 + 2^30 / (1000 x 192 x 16/30)",
     lambda: time_us(AIB, AR, "ring", "Simple", GiB), 204.4 * 1.4 + GiB / (1000 * 102.4), "tuning.cc:539-545"),
    # two p4de over EFA: latencyInter 75 (x2 for Simple), Intel netOverhead 1 us, llMaxBw[Intel][N2] 39
    ("AEFA tree AR LL lat: 6.8 + 2 (7 x .6 + (5 + 75))",
     lambda: lat(AEFA, AR, "tree", "LL"), 175.2, "tuning.cc:139,300-304,328-329"),
    ("AEFA tree AR Simple lat: 8.4 + 2 (7 x 4 + (14 + 2 x 75))",
     lambda: lat(AEFA, AR, "tree", "Simple"), 392.4, "tuning.cc:139,300-304,328-329"),
    ("AEFA ring AR Simple lat: 8.4 + 28 max(3.4, 3) + 2 (14 + 150)",
     lambda: lat(AEFA, AR, "ring", "Simple"), 431.6, "tuning.cc:300-324"),
    ("AEFA ring AG LL lat: 6.6 + 14 max(.6, 1) + (2.7 + 75)",
     lambda: lat(AEFA, AG, "ring", "LL"), 98.3, "tuning.cc:300-324"),
    ("AEFA ring AR Simple bw: 4 x 12 x 16/30",
     lambda: bw(AEFA, AR, "ring", "Simple"), 25.6, "tuning.cc:292"),
    ("AEFA tree AR Simple bw: tree bwIntra 24: min(96 x .92, 4 x 23.6) x .5",
     lambda: bw(AEFA, AR, "tree", "Simple"), 88.32 * 0.5, "tuning.cc:172,250,258"),
    ("AEFA tree AR LL128 bw: min(88.32 x 120/128, 4 x 20) x .5",
     lambda: bw(AEFA, AR, "tree", "LL128"), 40.0, "tuning.cc:166,260"),
    ("AEFA ring AG LL bw: min(39, 48 x .5) x 16/15",
     lambda: bw(AEFA, AG, "ring", "LL"), 25.6, "tuning.cc:152,256,292"),
    ("AEFA tree AR Simple 1 GiB: 392.4 + 2^30 / (1000 x 44.16), factor 1 beyond 256 MiB",
     lambda: time_us(AEFA, AR, "tree", "Simple", GiB), 392.4 + GiB / (1000 * 44.16), "tuning.cc:538,545"),
]


@pytest.mark.parametrize("case, value, expected, where", A100_CASES, ids=[c[0] for c in A100_CASES])
def test_a100_hand_computed(case, value, expected, where):
    assert value() == pytest.approx(expected, rel=1e-9, abs=1e-12)


# (topology, coll, size) -> (algo, proto), each worked by hand from the times in the comments (us)
A100_CHOICES = [
    # A1 AR: 1 MiB ring LL 15 + 20.9 < tree LL128 31.5 + 20.4; 64 MiB ring Simple 56 + 489 < LL128 40.6 + 532
    (A1, AR, MiB, ("ring", "LL")), (A1, AR, 64 * MiB, ("ring", "Simple")), (A1, AR, GiB, ("ring", "Simple")),
    # A1 AG: 1 MiB LL 10.8 + 10.5 < LL128 27.3 + 4.2; 64 MiB Simple 32.2 + 244.7 < LL128 27.3 + 266
    (A1, AG, MiB, ("ring", "LL")), (A1, AG, 64 * MiB, ("ring", "Simple")), (A1, AG, GiB, ("ring", "Simple")),
    # AIB AR: 1 MiB tree LL128 48.5 + 21.8 (factor .6) < ring LL128 78 + 12.3; 64 MiB ring LL128
    # 78 + 786 < ring Simple 286.2 + 655 < tree LL128 48.5 + 932 (factor .9); 1 GiB ring Simple
    # 286.2 + 10486 < tree Simple 92.4 + 11374
    (AIB, AR, MiB, ("tree", "LL128")), (AIB, AR, 64 * MiB, ("ring", "LL128")), (AIB, AR, GiB, ("ring", "Simple")),
    # AIB AG (ring only): 1 MiB LL128 46 + 6.1 < LL 37.3 + 43.7; 64 MiB Simple 106.4 + 327.7 < LL128 46 + 393.2
    (AIB, AG, MiB, ("ring", "LL128")), (AIB, AG, 64 * MiB, ("ring", "Simple")), (AIB, AG, GiB, ("ring", "Simple")),
    # AEFA AR: 1 MiB tree LL128 198.5 + 43.7; 64 MiB tree LL128 198.5 + 1864 < tree Simple 392.4 + 1900;
    # 1 GiB tree Simple 392.4 + 24315 < tree LL128 198.5 + 26844
    (AEFA, AR, MiB, ("tree", "LL128")), (AEFA, AR, 64 * MiB, ("tree", "LL128")), (AEFA, AR, GiB, ("tree", "Simple")),
    # AEFA AG: 1 MiB LL 98.3 + 41.0 < LL128 119.6 + 22.3; 64 MiB Simple 220 + 1310.7 < LL128 119.6 + 1424.7
    (AEFA, AG, MiB, ("ring", "LL")), (AEFA, AG, 64 * MiB, ("ring", "Simple")), (AEFA, AG, GiB, ("ring", "Simple")),
]


@pytest.mark.parametrize("topo, coll, size, expected", A100_CHOICES,
                         ids=[f"{['A1', 'AIB', 'AEFA'][[A1, AIB, AEFA].index(c[0])]}-{c[1]}-{c[2]}" for c in A100_CHOICES])
def test_a100_choices(topo, coll, size, expected):
    assert nt.choose(coll, size, topo)[:2] == expected


P4DE = Path(__file__).resolve().parents[2] / "shared/data/nccl-tests/other-formats/aws-p4de-2node-allreduce.out"


@pytest.mark.skipif(not P4DE.exists(), reason="shared/ data not checked out beside the project")
@pytest.mark.parametrize("size", [8, 256 * MiB, GiB, 2 * GiB])
def test_p4de_ends_near_measured(size):
    """NCCL's estimate vs the published 2 x p4de all_reduce_perf (out-of-place, NCCL version unstated):
    within 10% at the latency floor (model 175.2 us tree LL vs ~161) and at >= 256 MiB (tree Simple
    bus 88.3 GB/s vs measured busbw 70-78). Mid sizes (2-64 MiB) run 20-45% slower than the model
    and are not asserted: the tuner is a ranking heuristic, not a timer."""
    for line in P4DE.read_text().splitlines():
        fields = line.removeprefix("0: ").split()
        if fields and not fields[0].startswith("#") and int(fields[0]) == size:
            measured_us = float(fields[5])
            break
    assert nt.choose("all_reduce", size, AEFA)[2] * 1e6 == pytest.approx(measured_us, rel=0.10)
