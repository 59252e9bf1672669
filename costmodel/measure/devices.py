"""The GPU a log ran on against the spec it is validated with: one note where they differ (not a refusal: a spec
may be a variant, and a user may mean to price one GPU's logs on another)."""

from __future__ import annotations

import re

#: device families as device names spell them (nccl-tests' rank lines print the CUDA/HIP name, 'NVIDIA H100 80GB
#: HBM3', 'NVIDIA A100-SXM4-80GB', 'AMD Instinct MI300X') and as specs' names and descriptions do ('h100-sxm',
#: '8 x A100', 'AWS Trainium2 chip', 'Google TPU v4 chip'); a variant's suffix (SXM, PCIe, X, A) is not told apart
_FAMILY = re.compile(r"(?<![a-z0-9])(a100|h100|h200|h800|b100|b200|mi250|mi300|mi325|mi355|trainium\d*|tpu)(?![0-9])",
                     re.IGNORECASE)


#: what torch's platform.machine() and a CPU run name in place of a GPU (cost4d bench collectives on gloo)
_CPU = re.compile(r"^(?:x86_64|amd64|i[3-6]86|aarch64|arm64|ppc64le|s390x|riscv64|cpu)$", re.IGNORECASE)
#: the collective libraries GPU specs price (NCCL and AMD's RCCL, its port)
_GPU_BACKENDS = frozenset({"nccl", "rccl"})


def families(text: str) -> set[str]:
    """The GPU families ``text`` names, upper case: {'H100'}; none where it names no known one."""
    return {name.upper() for name in _FAMILY.findall(text)}


def logged(documents: list[dict], key: str) -> list[str]:
    """The values of environment ``key`` ('devices': a log's '#  Rank' lines, a benchmark's own; 'backend') the
    documents' runs list, each once."""
    names = set()
    for doc in documents:
        for run in doc.get("runs") or []:
            environment = run.get("environment") or doc.get("environment") or {}
            value = environment.get(key) or []
            names.update(str(name) for name in (value if isinstance(value, list) else [value]))
    return sorted(names)


def logged_devices(documents: list[dict]) -> list[str]:
    """The device names the documents' runs list, each once."""
    return logged(documents, "devices")


def cpu_note(documents: list[dict], spec) -> str | None:
    """One line where a GPU spec prices measurements of CPUs or of another library than NCCL (a gloo run of
    `bench collectives`), else None."""
    if spec.kind != "gpu":
        return None
    cpus = [name for name in logged_devices(documents) if _CPU.match(name)]
    other = [name for name in logged(documents, "backend") if name.lower() not in _GPU_BACKENDS]
    if not cpus and not other:
        return None
    ran = (f"on {', '.join(cpus)} (CPUs, not GPUs)" if cpus else "") + (" " if cpus and other else "") + (
        f"over {', '.join(other)} (not NCCL)" if other else "")
    return (f"the measurements ran {ran}, while the spec {spec.name} prices NCCL on {spec.description}; "
            "the predictions are the spec's, not those measurements' system")


def device_note(documents: list[dict], spec) -> str | None:
    """One line where the logs ran on a GPU family the spec does not name, else None (they match, or either side
    names no family it knows: a log without rank lines, a spec of another kind)."""
    cpu = cpu_note(documents, spec)
    if cpu:
        return cpu
    names = logged_devices(documents)
    found, specified = families(" ".join(names)), families(f"{spec.name} {spec.description}")
    if not found or not specified or found <= specified:
        return None
    return (f"the logs' GPUs are {', '.join(names)}, while the spec {spec.name} is {' / '.join(sorted(specified))} "
            f"({spec.description}); the predictions are the spec's")
