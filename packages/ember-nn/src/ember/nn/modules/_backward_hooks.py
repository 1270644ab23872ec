"""Full backward hooks of modules: identity autograd Functions around a module's inputs and outputs
catch the gradients flowing through them."""
from ember._tensor import Tensor
from ember.autograd import Function


def _tensors(values):
    return [i for i, v in enumerate(values) if isinstance(v, Tensor) and v.requires_grad]


class _State:
    def __init__(self, module, n_inputs, input_positions):
        self.module, self.n_inputs, self.input_positions = module, n_inputs, input_positions
        self.grad_output = None


def _call_hooks(state, grad_input):
    module = state.module
    for hook in module._backward_hooks.values():
        result = hook(module, grad_input, state.grad_output)
        if result is not None:
            grad_input = tuple(result)
    return grad_input


class _Identity(Function):
    """Passes tensors through unchanged; subclasses act on the gradients flowing back."""

    @staticmethod
    def forward(ctx, state, *tensors):
        ctx.state = state
        return tensors


class _InputsHook(_Identity):
    @staticmethod
    def backward(ctx, *grads):
        state = ctx.state
        full = [None] * state.n_inputs
        for pos, g in zip(state.input_positions, grads):
            full[pos] = g
        full = _call_hooks(state, tuple(full))
        return (None,) + tuple(full[pos] for pos in state.input_positions)


class _OutputsHook(_Identity):
    @staticmethod
    def backward(ctx, *grads):
        state = ctx.state
        for hook in state.module._backward_pre_hooks.values():
            result = hook(state.module, grads)
            if result is not None:
                grads = tuple(result)
        state.grad_output = grads
        if not state.input_positions:  # no input needs a gradient: the hooks see grad_input of Nones
            _call_hooks(state, (None,) * state.n_inputs)
        return (None,) + tuple(grads)


def wrap_inputs(module, args):
    positions = _tensors(args)
    state = _State(module, len(args), positions)
    if not positions:
        return args, state
    wrapped = _InputsHook.apply(state, *[args[i] for i in positions])
    args = list(args)
    for pos, t in zip(positions, wrapped):
        args[pos] = t
    return tuple(args), state


def wrap_outputs(module, output, state):
    single = isinstance(output, Tensor)
    outs = (output,) if single else output
    if not isinstance(outs, tuple):
        return output
    positions = _tensors(outs)
    if not positions:
        return output
    wrapped = _OutputsHook.apply(state, *[outs[i] for i in positions])
    outs = list(outs)
    for pos, t in zip(positions, wrapped):
        outs[pos] = t
    return outs[0] if single else tuple(outs)
