"""``ember.compile``: accepted as in PyTorch, and runs eagerly.

ember has no graph compiler: its eager path (NumPy or CuPy calls through a thin dispatcher) is what runs.
``ember.compile`` checks its arguments as ``torch.compile`` does and gives back the model or function itself,
so a compiled module stays the same module (its ``state_dict`` keys have no ``_orig_mod.`` prefix, and
prefix-stripping code that PyTorch needs finds nothing to strip).
"""

_MODES = ("default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")
# the backends a stock PyTorch names (torch._dynamo.list_backends(exclude_tags=())), and those it lists by default
BACKENDS = ("aot_eager", "aot_eager_decomp_partition", "aot_eager_decomp_partition_crossref",
            "aot_eager_decomp_partition_with_mode", "aot_eager_default_partitioner", "aot_ts", "cudagraphs", "eager",
            "eager_debug", "eager_noexcept", "inductor", "invoke_subgraph", "openxla", "openxla_eval",
            "pre_dispatch_eager", "ts", "tvm")
LISTED_BACKENDS = ("cudagraphs", "inductor", "openxla", "tvm")


class InvalidBackend(RuntimeError):
    """``compile`` was given a backend name PyTorch does not know (PyTorch's exception of that name)."""


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,
            name=None, disable=False, recompile_limit=None, isolate_recompiles=False, shapes_spec=None):
    """Return ``model`` (a module or a function) itself: ember runs eagerly, so there is nothing to compile.

    Without ``model`` it is a decorator factory (``@ember.compile(mode="max-autotune")``). Arguments are
    checked as PyTorch checks them (with its exception types): an unknown ``mode`` or ``backend``, ``mode``
    together with ``options``, or something not callable raise. ``options`` are not checked: ember does not
    know the compiler's option names.
    """
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if mode is not None and mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(_MODES)}")
    if not callable(backend) and backend not in BACKENDS:
        raise InvalidBackend(f"Invalid backend: {backend!r}, see `ember.compiler.list_backends()` for available "
                           "backends.")
    if dynamic is not None and not isinstance(dynamic, bool):
        raise AssertionError(f"Expected dynamic to be None or a bool, got {type(dynamic)}")
    if model is None:
        def decorate(fn):
            return compile(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options,
                           name=name, disable=disable)
        return decorate
    if not callable(model):
        raise AssertionError(f"A callable function is expected, but {type(model)} is provided.")
    return model
