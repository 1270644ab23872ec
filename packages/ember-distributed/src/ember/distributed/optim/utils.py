"""Functional optimisers: ``as_functional_optim(optim_cls, *args, **kwargs)`` gives an optimiser without parameters
of its own that updates the parameters of its ``param_group`` with a list of gradients handed to it
(``step(gradients)``), or (SGD, Adam, AdamW) one parameter with its gradient (``step_param(param, grad)``), as
torch.distributed.optim's do.

torch writes each one out again in TorchScript; ember's step with the algorithm of ember.optim's class itself, so the
two cannot drift apart: each parameter gets an ``optim_cls([param], ...)`` of its own on its first step (these
algorithms are elementwise, so stepping parameters one by one changes nothing), and ``defaults`` are copied into it
before each step, so changing ``defaults["lr"]`` takes effect as in torch. ``state[param]`` is that optimiser's
state of ``param``, the same dict."""
import ember
from ember import no_grad, optim

__all__ = ["as_functional_optim", "register_functional_optim"]


class _FunctionalOptimizer:
    """A functional form of ``_optim_cls``: ``_defaults`` are the options torch's functional class keeps in
    ``defaults`` (``beta1``/``beta2`` are the two ``betas``), ``_flags`` those it keeps as attributes, ``_fixed``
    (``_fixed_flags``) constants it adds to ``defaults`` (as attributes), ``_lr`` its default learning rate where
    it differs from the class's."""

    _optim_cls = None
    _defaults = ()
    _flags = ()
    _fixed = {}
    _fixed_flags = {}
    _lr = None

    def __init__(self, params, *args, _allow_empty_param_list=False, **kwargs):
        params = list(params)
        if not params and not _allow_empty_param_list:
            raise ValueError("optimizer got an empty parameter list")
        if self._lr is not None and not args and "lr" not in kwargs:
            kwargs["lr"] = self._lr
        self._args, self._kwargs = args, kwargs
        # an optimiser over a stand-in validates the arguments as ember.optim does and resolves their defaults
        options = dict(self._optim_cls([_probe()], *args, **kwargs).param_groups[0])
        if "betas" in options:
            options["beta1"], options["beta2"] = options["betas"]
        self.defaults = {k: _as_float(options[k]) for k in self._defaults}
        self.defaults.update(self._fixed)
        for k in self._flags:
            setattr(self, k, bool(options[k]) if options[k] is None else options[k])
        for k, v in self._fixed_flags.items():
            setattr(self, k, v)
        self.state = {}
        self.param_group = {"params": params}
        self._inner = {}

    def _optimizer_of(self, param):
        opt = self._inner.get(param)
        if opt is None:
            opt = self._inner[param] = self._optim_cls([param], *self._args, **self._kwargs)
        group = opt.param_groups[0]
        for k, v in self.defaults.items():
            if k in group:
                group[k] = v
        if "beta1" in self.defaults:
            group["betas"] = (self.defaults["beta1"], self.defaults["beta2"])
        return opt

    def _step_param(self, param, grad):
        if grad is None:
            return
        opt = self._optimizer_of(param)
        saved = param.grad
        param.grad = grad
        try:
            with no_grad():
                opt.step()
        finally:
            param.grad = saved
        self.state[param] = opt.state[param]

    def step(self, gradients):
        """Update the parameters of ``param_group`` with ``gradients`` (one per parameter; None: left as it is)."""
        params = self.param_group["params"]
        if len(params) != len(gradients):
            raise ValueError("the gradients passed in does not equal to the size of the parameters!"
                             f"Params length: {len(params)}. Gradients length: {len(gradients)}")
        for param, grad in zip(params, gradients):
            self._step_param(param, grad)


class _WithStepParam(_FunctionalOptimizer):
    """Those of torch's functional optimisers that also update a single parameter."""

    def step_param(self, param, grad):
        """Update ``param`` with ``grad`` (nothing when ``grad`` is None)."""
        self._step_param(param, grad)


def _probe():
    return ember.nn.Parameter(ember.zeros(1))


def _as_float(v):
    return float(v) if isinstance(v, int) and not isinstance(v, bool) else v


def _functional(name, optim_cls, defaults, flags, fixed=None, lr=None, step_param=False, fixed_flags=None):
    return type(f"_Functional{name}", (_WithStepParam if step_param else _FunctionalOptimizer,), {
        "_optim_cls": optim_cls, "_defaults": defaults, "_flags": flags, "_fixed": fixed or {}, "_lr": lr,
        "_fixed_flags": fixed_flags or {},
        "__module__": __name__, "__doc__": f"The functional form of ember.optim.{optim_cls.__name__}."})


_ADAM = ("lr", "eps", "beta1", "beta2", "weight_decay")
_FunctionalSGD = _functional("SGD", optim.SGD, ("lr", "momentum", "dampening", "weight_decay"),
                             ("nesterov", "maximize", "foreach", "fused"), lr=1e-2, step_param=True)
_FunctionalAdam = _functional("Adam", optim.Adam, _ADAM, ("amsgrad", "maximize", "foreach", "fused"),
                              step_param=True)
_FunctionalAdamW = _functional("AdamW", optim.AdamW, _ADAM, ("amsgrad", "maximize", "foreach", "fused"),
                               step_param=True)
_FunctionalAdagrad = _functional("Adagrad", optim.Adagrad,
                                 ("lr", "lr_decay", "eps", "weight_decay", "initial_accumulator_value"),
                                 ("foreach", "fused", "maximize"),
                                 {"warmup_lr_multiplier": 1.0, "warmup_num_iters": 0.0},
                                 fixed_flags={"coalesce_grad": True})
_FunctionalAdadelta = _functional("Adadelta", optim.Adadelta, ("lr", "rho", "eps", "weight_decay"),
                                  ("foreach", "maximize"))
_FunctionalRMSprop = _functional("RMSprop", optim.RMSprop, ("lr", "alpha", "eps", "weight_decay", "momentum"),
                                 ("centered", "foreach", "maximize"))
_FunctionalRprop = _functional("Rprop", optim.Rprop, ("lr",), ("etas", "step_sizes", "foreach", "maximize"))
_FunctionalAdamax = _functional("Adamax", optim.Adamax, _ADAM, ("foreach", "maximize"), lr=1e-3)

# optimiser class -> its functional form (ZeroRedundancyOptimizer refuses the latter without overlap_with_ddp)
functional_optim_map = {optim.Adagrad: _FunctionalAdagrad, optim.Adam: _FunctionalAdam,
                        optim.AdamW: _FunctionalAdamW, optim.SGD: _FunctionalSGD,
                        optim.Adadelta: _FunctionalAdadelta, optim.RMSprop: _FunctionalRMSprop,
                        optim.Rprop: _FunctionalRprop, optim.Adamax: _FunctionalAdamax}


def register_functional_optim(key, optim):
    """Map ``key`` (an optimiser class or any name) to the functional optimiser ``optim``, unless already mapped."""
    functional_optim_map.setdefault(key, optim)


def as_functional_optim(optim_cls, *args, **kwargs):
    """The functional form of ``optim_cls`` made with ``*args, **kwargs`` and no parameters (ValueError if it has
    none)."""
    try:
        functional_cls = functional_optim_map[optim_cls]
    except KeyError as e:
        raise ValueError(f"Optimizer {optim_cls} does not have a functional counterpart!") from e
    return functional_cls([], *args, _allow_empty_param_list=True, **kwargs)
