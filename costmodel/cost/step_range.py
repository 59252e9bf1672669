"""A step time's range: where the measured step lies for the runs the model was fitted on (its residuals' 5th to 95th
percentiles), widened where a device borrows its step fraction, and reaching the slowest measured framework's time
where a framework has no runs of its own (cost.evaluate.slowest_measured_time)."""

from __future__ import annotations


def errors(hardware, precision: str = "bf16", moe: bool = False, framework=None):
    """(low, high) of predicted / measured - 1 over the fit's rows (held out and fitted), or None without a fit
    (and for MoE models: no fitted run had experts); a framework with a fitted time: its runs' spread."""
    if moe:
        return None
    if framework is not None and framework.time_on(hardware) is not None:
        return framework.time.error_low, framework.time.error_high
    sm = hardware.step_model
    pair = (sm.fp8_error_low, sm.fp8_error_high) if precision == "fp8" else (sm.error_low, sm.error_high)
    return None if None in pair else pair


def band(step, hardware, moe: bool = False, framework=None):
    """(low, high): where the measured step lay for the fit's rows (held out and fitted), or None without a band;
    on a device whose step fraction is borrowed (``fraction_range``), the matmuls' and attention's share of the
    step widened over that range first."""
    pair = errors(hardware, step.precision, moe, framework)
    if pair is None:
        return None
    widened = fraction_widening(step, hardware, framework) or (step.step_s, step.step_s)
    low, high = spread(widened, pair)
    if step.slowest_measured_s is None:
        return low, high
    return low, max(high, step.slowest_measured_s)  # as slow as the slowest framework that has runs


def spread(predicted, pair):
    """Where the measured value lies for a band of prediction / measured - 1, ``pair`` = (low, high):
    (fastest / (1 + high), slowest / (1 + low)); ``predicted`` one value or (fastest, slowest)."""
    fastest, slowest = predicted if isinstance(predicted, tuple) else (predicted, predicted)
    return fastest / (1 + pair[1]), slowest / (1 + pair[0])


def fraction_widening(step, hardware, framework=None):
    """(step at the highest sustained fraction, at the lowest) where the spec borrows its fraction
    (``fraction_range``), else None: the matmuls' and attention's time on the critical path scales by f / f_high
    and f / f_low, stretched by the bubble; exposed traffic and the optimizer step do not scale."""
    sm = hardware.step_model
    if sm.fraction_range is None or (framework is not None and framework.time_on(hardware) is not None):
        return None
    from costmodel.formulas.step import pipelined_seconds

    timed = step.matmul_s + step.attention_s  # on the critical path, which the bubble stretches; not the rest
    f, (f_low, f_high) = sm.sustained_fraction, sm.fraction_range
    return tuple(step.step_s + pipelined_seconds(critical=timed * (f / end - 1), bubble=step.bubble)
                 for end in (f_high, f_low))
