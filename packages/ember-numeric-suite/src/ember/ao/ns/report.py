"""A per-layer report of quantization error: which layers of a quantized model lose the most against the float
model it came from.

``layer_errors`` turns the results of ``compare_model_stub``, ``compare_model_outputs`` or ``compare_weights``
into one row per layer (SQNR, normalized L2 error, cosine similarity, shape); ``numeric_report`` runs the
comparison on copies of both models for some sample data and returns the rows as a ``NumericReport``, a table that
prints itself and plots itself with matplotlib (the ``plot`` extra).
"""
import copy
import math
import os
import re
from dataclasses import dataclass

import ember
from ember.ao.quantization import DeQuantStub
from ember.ao.quantization.quantization_mappings import (
    get_default_dynamic_quant_module_mappings,
    get_default_static_quant_module_mappings,
)

from . import _numeric_suite as ns
from .metrics import compute_cosine_similarity, compute_normalized_l2_error, compute_sqnr

__all__ = ["LayerError", "NumericReport", "default_module_swap_list", "layer_errors", "numeric_report"]

MODES = ("stub", "outputs", "weights")
# metric -> whether a larger value is better
METRICS = {"sqnr": True, "normalized_l2_error": False, "cosine_similarity": True}
# the end of a result key after the module's path: logger stats, a weight, a Linear's packed (weight, bias), a
# dynamic RNN layer's packed weights
_KEY_SUFFIX = re.compile(r"(^|\.)(stats|weight|_packed_params\._packed_params|_all_weight_values\.\d+\.param)$")


@dataclass(frozen=True)
class LayerError:
    """One layer's error: ``key`` is the entry of the numeric-suite result it comes from, ``layer`` the module's
    path in the model (``""`` for the model itself); metrics over all calls together, None for outputs that are not
    float32 once dequantized; ``shape`` of the float result of the first call."""

    key: str
    layer: str
    sqnr: float | None
    normalized_l2_error: float | None
    cosine_similarity: float | None
    shape: tuple
    calls: int


def _first_tensor(value):
    """The tensor an output stands for: the first item of (nested) tuples and lists, e.g. an LSTM's output
    sequence out of ``(output, (h, c))``."""
    while isinstance(value, (tuple, list)):
        value = value[0]
    return value


def _as_float(metric_value):
    return None if metric_value is None else float(metric_value.reshape(-1)[0].item())


def layer_errors(results):
    """A ``LayerError`` per entry of a numeric-suite result (``{key: {"float": ..., "quantized": ...}}`` with a
    list of outputs per call, or one weight), in the result's order."""
    rows = []
    for key, entry in results.items():
        floats, quantized = entry["float"], entry["quantized"]
        if not isinstance(floats, list):  # (compare_weights: one tensor each)
            floats, quantized = [floats], [quantized]
        if not floats:
            continue
        if len(floats) != len(quantized):
            # a fused module's logger is run twice per call in the float model (by the fused Sequential's forward,
            # then by its hook), as in PyTorch: one entry per call, the hook's
            if not quantized or len(floats) % len(quantized):
                raise ValueError(f"{key}: {len(floats)} float results for {len(quantized)} quantized ones")
            floats = floats[len(floats) // len(quantized) - 1::len(floats) // len(quantized)]
        floats = [_first_tensor(v) for v in floats]
        quantized = [_first_tensor(v) for v in quantized]
        quantized = [v.dequantize() if v.is_quantized else v for v in quantized]
        x = ember.cat([v.reshape(-1) for v in floats])
        y = ember.cat([v.reshape(-1) for v in quantized])
        rows.append(LayerError(key=key, layer=_KEY_SUFFIX.sub("", key), sqnr=_as_float(compute_sqnr(x, y)),
                               normalized_l2_error=_as_float(compute_normalized_l2_error(x, y)),
                               cosine_similarity=_as_float(compute_cosine_similarity(x, y)),
                               shape=tuple(floats[0].shape), calls=len(floats)))
    return rows


def _cell(value, fmt):
    return "-" if value is None else "inf" if math.isinf(value) else format(value, fmt)


class NumericReport:
    """The rows of ``numeric_report`` (``LayerError``), in the model's order: iterate them, index them by position
    or layer path, print the table, ``worst()`` for the layer that loses the most, ``plot()`` a chart."""

    def __init__(self, rows, mode):
        self.rows = list(rows)
        self.mode = mode
        self.figure = None  # the chart numeric_report drew, if any

    def __len__(self):
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)

    def __getitem__(self, index):
        if isinstance(index, str):
            for row in self.rows:
                if row.layer == index:
                    return row
            raise KeyError(index)
        return self.rows[index]

    def worst(self, metric="sqnr"):
        """The row with the worst value of ``metric`` (lowest SQNR or cosine similarity, highest normalized L2
        error); rows without a value are passed over."""
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {sorted(METRICS)}, got {metric!r}")
        rows = [r for r in self.rows if getattr(r, metric) is not None and not math.isnan(getattr(r, metric))]
        if not rows:
            raise ValueError(f"no layer of the report has a {metric} value")
        pick = min if METRICS[metric] else max
        return pick(rows, key=lambda r: getattr(r, metric))

    def table(self):
        """The report as a text table, one line per layer."""
        header = ("layer", "SQNR (dB)", "norm. L2 error", "cosine sim.", "shape")
        lines = [(r.layer or "(model)", _cell(r.sqnr, ".2f"), _cell(r.normalized_l2_error, ".5f"),
                  _cell(r.cosine_similarity, ".5f"), str(tuple(r.shape))) for r in self.rows]
        widths = [max(len(c) for c in column) for column in zip(header, *lines)]

        def line(cells):  # (names and shapes to the left, numbers to the right)
            ends = (0, len(cells) - 1)
            return "  ".join(c.ljust(w) if i in ends else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

        title = f"quantization error per layer ({self.mode})"
        return "\n".join([title] + [line(cells).rstrip() for cells in (header, *lines)])

    __str__ = table

    def __repr__(self):
        return f"NumericReport(mode={self.mode!r}, {len(self.rows)} layers)"

    def plot(self, path=None):
        """A bar chart of each layer's SQNR (the worst in red; infinite values drawn as the longest bar, labelled
        "inf") as a matplotlib ``Figure``, saved to ``path`` if given. Needs matplotlib (``pip install
        ember-numeric-suite[plot]``)."""
        try:
            from matplotlib.figure import Figure
        except ImportError as e:
            raise ImportError("NumericReport.plot needs matplotlib: pip install ember-numeric-suite[plot]") from e
        values = [r.sqnr if r.sqnr is not None and not math.isnan(r.sqnr) else 0.0 for r in self.rows]
        finite = [v for v in values if not math.isinf(v)]
        cap = max(finite, default=0.0) * 1.1 + 1.0
        shown = [cap if math.isinf(v) else v for v in values]
        worst = self.worst().layer if any(r.sqnr is not None for r in self.rows) else None
        figure = Figure(figsize=(7, 0.35 * len(self.rows) + 1.2), layout="constrained")
        ax = figure.add_subplot()
        labels = [r.layer or "(model)" for r in self.rows]
        bars = ax.barh(labels, shown, color=["tab:red" if r.layer == worst else "tab:blue" for r in self.rows])
        for bar, value in zip(bars, values):
            if math.isinf(value):
                ax.annotate("inf", (bar.get_width(), bar.get_y() + bar.get_height() / 2), va="center")
        ax.invert_yaxis()  # (the model's order, top down)
        ax.set_xlabel("SQNR (dB), higher is better")
        ax.set_title(f"quantization error per layer ({self.mode})")
        if path is not None:
            figure.savefig(path)
        return figure


class _BatchShadowLogger(ns.ShadowLogger):
    """ShadowLogger keeping whole outputs (ShadowLogger keeps the first item of a batch): the first tensor of a
    tuple output, the whole tensor otherwise."""

    def forward(self, x, y):
        self.stats["quantized"].append(_first_tensor(x).detach())
        self.stats["float"].append(_first_tensor(y).detach())


def default_module_swap_list():
    """The float module types eager-mode quantization swaps (static and dynamic mappings), but DeQuantStub (its
    output is the same float either way): the types ``numeric_report`` shadows in its "stub" mode."""
    return (set(get_default_static_quant_module_mappings()) | set(get_default_dynamic_quant_module_mappings())) - {
        DeQuantStub}


def numeric_report(float_model, q_model, *data, mode="stub", module_swap_list=None, allow_list=None, show=True,
                   plot=None):
    """Compare ``q_model`` with the float model it was quantized from on ``data`` (the positional inputs of one
    call) and return a ``NumericReport``, one row per layer. Both models are copied and put in eval mode: neither
    is changed. Pass the float model as it was before ``prepare`` (after fusion): layers match by name.

    ``mode``: "stub" (default) runs each quantized layer beside its float twin on the same input
    (``compare_model_stub`` on the ``module_swap_list`` types, default ``default_module_swap_list()``): the error
    each layer adds. "outputs" logs both models' activations (``compare_model_outputs`` on the ``allow_list``
    types): the error accumulated up to each layer. "weights" compares the weights (``compare_weights``; no data).

    ``show`` prints the table. ``plot``: None draws the chart (``report.figure``) when matplotlib is installed,
    True draws it (matplotlib needed), a path saves it there too, False draws nothing.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if mode == "weights":
        if data:
            raise TypeError("numeric_report(mode='weights') compares state_dicts and takes no data")
        results = ns.compare_weights(float_model.state_dict(), q_model.state_dict())
    else:
        if not data:
            raise TypeError(f"numeric_report(mode={mode!r}) needs sample data to run the models on")
        float_copy, q_copy = copy.deepcopy(float_model).eval(), copy.deepcopy(q_model).eval()
        with ember.no_grad():
            if mode == "stub":
                swap = default_module_swap_list() if module_swap_list is None else module_swap_list
                results = ns.compare_model_stub(float_copy, q_copy, swap, *data, logger_cls=_BatchShadowLogger)
            else:
                results = ns.compare_model_outputs(float_copy, q_copy, *data, allow_list=allow_list)
    report = NumericReport(layer_errors(results), mode)
    if show:
        print(report)
    if plot is not False and report.rows:
        path = None if plot is None or plot is True else os.fspath(plot)
        try:
            report.figure = report.plot(path)
        except ImportError:
            if plot is not None:  # (asked for: say what is missing)
                raise
    return report
