"""One package per parallel axis (data, tensor, pipeline, context), each behind the same small interface:

* what it shards (functions the aggregator calls for state, parameters and activations),
* ``collectives(...)``: the collectives it issues per step (:class:`~costmodel.parallel.collective.Collective`:
  op, buffer bytes, group, calls), with the axis name that places it on a network level,
* ``checks(shape, point)``: the layouts it rejects and why (:class:`~costmodel.parallel.collective.Rule`).

Every function takes numbers, numpy arrays or sympy symbols; the aggregator is ``costmodel.cost``.
"""
