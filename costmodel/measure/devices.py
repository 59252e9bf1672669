"""The GPU a log ran on against the spec it is validated with: one note where they differ (not a refusal: a spec
may be a variant, and a user may mean to price one GPU's logs on another)."""

from __future__ import annotations

import re

#: device families as device names spell them (nccl-tests' rank lines print the CUDA/HIP name, 'NVIDIA H100 80GB
#: HBM3', 'NVIDIA A100-SXM4-80GB', 'AMD Instinct MI300X') and as specs' names and descriptions do ('h100-sxm',
#: '8 x A100', 'AWS Trainium2 chip', 'Google TPU v4 chip'); a variant's suffix (SXM, PCIe, X, A) is not told apart
_FAMILY = re.compile(r"(?<![a-z0-9])(a100|h100|h200|h800|b100|b200|mi250|mi300|mi325|mi355|trainium\d*|tpu)(?![0-9])",
                     re.IGNORECASE)


def families(text: str) -> set[str]:
    """The GPU families ``text`` names, upper case: {'H100'}; none where it names no known one."""
    return {name.upper() for name in _FAMILY.findall(text)}


def logged_devices(documents: list[dict]) -> list[str]:
    """The device names the documents' runs list (a log's '#  Rank' lines, a benchmark's own), each once."""
    names = set()
    for doc in documents:
        for run in doc.get("runs") or []:
            environment = run.get("environment") or doc.get("environment") or {}
            names.update(str(name) for name in environment.get("devices") or [])
    return sorted(names)


def device_note(documents: list[dict], spec) -> str | None:
    """One line where the logs ran on a GPU family the spec does not name, else None (they match, or either side
    names no family it knows: a log without rank lines, a spec of another kind)."""
    names = logged_devices(documents)
    logged, specified = families(" ".join(names)), families(f"{spec.name} {spec.description}")
    if not logged or not specified or logged <= specified:
        return None
    return (f"the logs' GPUs are {', '.join(names)}, while the spec {spec.name} is {' / '.join(sorted(specified))} "
            f"({spec.description}); the predictions are the spec's")
