"""The world a block of an nccl-tests log ran on: its ranks, hosts and GPUs per node from the '#  Rank' lines,
or what the user gave (--nodes, --gpus-per-node), checked against what its bus bandwidth says."""

from __future__ import annotations

import math

from costmodel.errors import CostModelError
from costmodel.record import record


class Section:
    """One 'Collective test starting' block: its collective, rank lines and data rows; a test no model times
    (``unmodelled``: why) keeps no rows."""

    def __init__(self, collective: str, lineno: int, gpus_per_thread: int | None = None, unmodelled: str | None = None,
                 name: str | None = None):
        self.collective, self.lineno, self.unmodelled, self.name = collective, lineno, unmodelled, name or collective
        self.skipped: str | None = None  # why a part of its rows was left out
        self.told = False  # its world is --nodes/--gpus-per-node's (it lists no ranks)
        self.disagrees: str | None = None  # its rank lines' world is not --nodes/--gpus-per-node's (world_of)
        self.gpus_per_thread = gpus_per_thread  # nccl-tests -g: GPUs one thread drives
        self.ranks: dict[int, tuple[str, str, int]] = {}  # rank -> (host, device name, group)
        self.rows: list[dict] = []

    def add_rank(self, rank: int, host: str, device: str, path, lineno: int, group: int = 0) -> None:
        if rank in self.ranks:
            raise CostModelError(f"{path}:{lineno}: rank {rank} is listed twice in the "
                                 f"{self.collective} test (line {self.lineno})")
        self.ranks[rank] = (host, device, group)

    def environment(self, path) -> dict:
        """The world one collective ran on: all ranks, or with NCCL_TESTS_SPLIT_MASK (the rank lines' Group,
        nccl-tests README "Running multiple operations in parallel") one group, as every group reports."""
        world = len(self.ranks)
        if sorted(self.ranks) != list(range(world)):
            raise CostModelError(f"{path}: the {self.collective} test (line {self.lineno}) lists ranks "
                                 f"{_spans(sorted(self.ranks))}; expected 0 to {world - 1}")
        groups: dict[int, list] = {}
        for host, _, group in self.ranks.values():
            groups.setdefault(group, []).append(host)
        if len({len(hosts) for hosts in groups.values()}) > 1:
            sizes = ", ".join(f"group {g}: {len(h)}" for g, h in sorted(groups.items()))
            raise CostModelError(f"{path}: the {self.collective} test (line {self.lineno}) runs groups of different "
                                 f"sizes ({sizes}); cost4d times one collective of one size")
        per_host: dict[str, int] = {}
        for host in groups[self.ranks[0][2]]:
            per_host[host] = per_host.get(host, 0) + 1
        if len(set(per_host.values())) > 1:
            counts = ", ".join(f"{host}: {n}" for host, n in sorted(per_host.items()))
            raise CostModelError(f"{path}: ranks per host differ ({counts}); cost4d models nodes with "
                                 "equal numbers of GPUs")
        size = world // len(groups)
        env = {"world_size": size, "nodes": len(per_host), "gpus_per_node": size // len(per_host),
               "hosts": sorted(per_host), "devices": sorted({name for _, name, _ in self.ranks.values()}),
               "backend": "nccl", "gpus_per_thread": self.gpus_per_thread}
        return env | ({"parallel_groups": len(groups)} if len(groups) > 1 else {})


def _spans(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:8])) + (", ..." if len(ranks) > 8 else "")


def world_of(section: "Section", given: dict | None, previous: dict | None, path) -> dict:
    """A block's world: its rank lines, else --nodes/--gpus-per-node, else the block before's. Flags that disagree
    with the rank lines describe the logs without any (several logs imported together): the block notes the
    disagreement, which :func:`check_told` refuses where no log read with it took the flags."""
    if section.ranks:
        listed = section.environment(path)
        if given and (given["nodes"], given["gpus_per_node"]) != (listed["nodes"], listed["gpus_per_node"]):
            section.disagrees = (f"{path}: the log lists {listed['nodes']} x {listed['gpus_per_node']} ranks, but "
                                 f"--nodes/--gpus-per-node say {given['nodes']} x {given['gpus_per_node']}, and no "
                                 "log given lacks '#  Rank' lines for them to describe")
        _check_bus_factor(section, listed, path, listed=True)  # groups the rank lines do not show (split masks)
        return listed
    if given or previous:
        world = given or previous
        section.told = bool(given)
        _check_bus_factor(section, world, path)
        return world
    raise CostModelError(f"{path}: no '#  Rank' lines in the {section.collective} test (line {section.lineno}) "
                         "to tell the world size: give --nodes and --gpus-per-node")


def _check_bus_factor(section: "Section", world: dict, path, listed: bool = False) -> None:
    """A world size given for a log without rank lines must match what its busbw / algbw says: nccl-tests
    prints busbw = algbw x passes (n - 1)/n (formulas.comms.bus_factor), so the ratio names n. Rows under
    1 GB/s are left out (two printed decimals make their ratio coarse). Under rank lines (``listed``) only a
    ratio that names another finite n is refused: parallel groups the lines do not show (versions without
    Group, NCCL_TESTS_SPLIT_MASK)."""
    from costmodel.formulas.comms import PASSES, bus_factor

    ratios = sorted(r["busbw_bytes_per_s"] / r["algbw_bytes_per_s"] for r in section.rows
                    if r.get("algbw_bytes_per_s", 0) >= 1e9 and r.get("busbw_bytes_per_s"))
    if section.collective not in PASSES or not ratios:
        return
    ratio, n = ratios[len(ratios) // 2], world["world_size"]
    expected = bus_factor(op=section.collective, group=n)
    if abs(ratio - expected) > 0.01 * expected:
        passes = PASSES[section.collective]
        implied = passes / (passes - ratio) if ratio < passes else math.inf
        if listed and implied == math.inf:  # a ratio no group size gives: not a world the rank lines hide
            return
        told = (f"the {n} ranks it lists" if section.ranks else
                f"the {n} ranks of --nodes {world['nodes']} x --gpus-per-node {world['gpus_per_node']}")
        raise CostModelError(f"{path}: the {section.collective} test (line {section.lineno}) has busbw / algbw = "
                             f"{ratio:.4g}, {passes} (n - 1)/n for n = {implied:.3g}, not for {told} "
                             f"({expected:.4g})")


@record
class WorldFlags:
    """What --nodes/--gpus-per-node did in one log: gave a block without rank lines its world (``told``), or name
    another world than a block's rank lines (``disagrees``: the line that says so)."""

    told: bool = False
    disagrees: str | None = None


def flags_of(sections: list[Section]) -> WorldFlags:
    """What the flags did in a log's blocks (:func:`world_of` marks each)."""
    return WorldFlags(any(s.told for s in sections), next((s.disagrees for s in sections if s.disagrees), None))


def check_told(flags: list[WorldFlags]) -> None:
    """--nodes/--gpus-per-node are for logs without '#  Rank' lines: where no log read together takes them and one
    lists another world than the flags, the flags describe nothing given: one line says so."""
    if any(f.told for f in flags):
        return
    for f in flags:
        if f.disagrees:
            raise CostModelError(f.disagrees)
