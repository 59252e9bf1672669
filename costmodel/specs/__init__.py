"""Specs: model, hardware, training recipe and parallel layout (pydantic, frozen, extra='forbid')."""

#: the framework profile that adds nothing to the exact accounting (the default): commands load no
#: profile for it (costmodel.specs.load.load_run gives None)
EXACT = "exact"


#: the pipeline schedules a layout may name (the layout's field, a framework's list, the CLI's choices, the timeline)
SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb-h1")
#: how pipeline stages take the layers (--split): parallel/pipeline/stages.stage_layers
SPLITS = ("even", "ends", "compute")
