"""Constraints: what values a distribution's parameters and samples may take. ``check(value)`` gives a boolean
tensor (one entry per batch element: event dimensions are reduced)."""
import ember

__all__ = ["Constraint", "MixtureSameFamilyConstraint", "boolean", "cat", "corr_cholesky", "dependent",
           "dependent_property", "greater_than", "greater_than_eq", "half_open_interval", "independent",
           "integer_interval", "interval", "is_dependent", "less_than", "lower_cholesky", "lower_triangular",
           "multinomial", "nonnegative", "nonnegative_integer", "one_hot", "positive", "positive_definite",
           "positive_integer", "positive_semidefinite", "real", "real_vector", "simplex", "square", "stack",
           "symmetric", "unit_interval"]


class Constraint:
    is_discrete = False
    event_dim = 0

    def check(self, value):
        raise NotImplementedError

    def __repr__(self):
        return self.__class__.__name__.lstrip("_") + "()"


class _Dependent(Constraint):
    """A placeholder: the support depends on other parameters, and is not checked."""

    def __init__(self, *, is_discrete=False, event_dim=0):
        self.is_discrete, self.event_dim = is_discrete, event_dim

    def __call__(self, *, is_discrete=False, event_dim=0):
        return _Dependent(is_discrete=is_discrete, event_dim=event_dim)

    def check(self, value):
        raise ValueError("Cannot determine validity of dependent constraint")


class dependent_property(property):
    """A property whose constraint depends on the instance (e.g. Categorical's support)."""

    def __init__(self, fn=None, *, is_discrete=False, event_dim=0):
        super().__init__(fn)
        self.is_discrete, self.event_dim = is_discrete, event_dim

    def __call__(self, fn):
        return dependent_property(fn, is_discrete=self.is_discrete, event_dim=self.event_dim)


class _Real(Constraint):
    def check(self, value):
        return value == value  # False at NaN only


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _GreaterThan(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return self.lower_bound < value

    def __repr__(self):
        return f"GreaterThan(lower_bound={self.lower_bound})"


class _GreaterThanEq(_GreaterThan):
    def check(self, value):
        return self.lower_bound <= value

    def __repr__(self):
        return f"GreaterThanEq(lower_bound={self.lower_bound})"


class _LessThan(Constraint):
    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return value < self.upper_bound

    def __repr__(self):
        return f"LessThan(upper_bound={self.upper_bound})"


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (self.lower_bound <= value) & (value <= self.upper_bound)

    def __repr__(self):
        return f"Interval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _HalfOpenInterval(_Interval):
    def check(self, value):
        return (self.lower_bound <= value) & (value < self.upper_bound)

    def __repr__(self):
        return f"HalfOpenInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (value % 1 == 0) & (self.lower_bound <= value) & (value <= self.upper_bound)

    def __repr__(self):
        return f"IntegerInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerGreaterThan(Constraint):
    is_discrete = True

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return (value % 1 == 0) & (value >= self.lower_bound)

    def __repr__(self):
        return f"IntegerGreaterThan(lower_bound={self.lower_bound})"


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        return ember.all(value >= 0, dim=-1) & ((value.sum(-1) - 1).abs() < 1e-6)


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value):
        return ((value == 0) | (value == 1)).all(-1) & (value.sum(-1) == 1)


class _IndependentConstraint(Constraint):
    """``base`` over the rightmost ``reinterpreted_batch_ndims`` dimensions as one event."""

    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value):
        result = self.base_constraint.check(value)
        if self.reinterpreted_batch_ndims:
            result = result.reshape(result.shape[:result.dim() - self.reinterpreted_batch_ndims] + (-1,)).all(-1)
        return result

    def __repr__(self):
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class _Multinomial(Constraint):
    """Non-negative counts whose sum is at most ``upper_bound`` (PyTorch checks this weaker bound too)."""
    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return (value >= 0).all(dim=-1) & (value.sum(dim=-1) <= self.upper_bound)


def _all_matrix(mask):
    """Per matrix: whether every entry of the boolean ``mask`` (..., n, m) holds."""
    return mask.reshape(mask.shape[:-2] + (-1,)).all(-1)


class _LowerTriangular(Constraint):
    event_dim = 2

    def check(self, value):
        return _all_matrix(value.tril() == value)


class _LowerCholesky(Constraint):
    """Lower triangular with a positive diagonal."""
    event_dim = 2

    def check(self, value):
        return _all_matrix(value.tril() == value) & (value.diagonal(dim1=-2, dim2=-1) > 0).all(-1)


class _CorrCholesky(Constraint):
    """Cholesky factor of a correlation matrix: lower Cholesky with rows of unit Euclidean norm."""
    event_dim = 2

    def check(self, value):
        tol = ember.finfo(value.dtype).eps * value.size(-1) * 10  # rounding of a sum of n squares, with margin
        unit_rows = ((value.detach().pow(2).sum(-1).sqrt() - 1).abs() <= tol).all(-1)
        return _LowerCholesky().check(value) & unit_rows


class _Square(Constraint):
    event_dim = 2

    def check(self, value):
        return ember.full(value.shape[:-2], value.shape[-2] == value.shape[-1], dtype=ember.bool,
                          device=value.device)


class _Symmetric(_Square):
    def check(self, value):
        square = super().check(value)
        if not square.all():
            return square
        return _all_matrix(ember.isclose(value, value.mT, atol=1e-6))


class _PositiveDefinite(_Symmetric):
    def check(self, value):
        symmetric = super().check(value)
        if not symmetric.all():
            return symmetric
        return ember.linalg.cholesky_ex(value).info == 0


class _PositiveSemidefinite(_Symmetric):
    def check(self, value):
        symmetric = super().check(value)
        if not symmetric.all():
            return symmetric
        return (ember.linalg.eigvalsh(value) >= 0).all(-1)


class _Cat(Constraint):
    """Constraints ``cseq`` on consecutive slices of ``lengths`` (default 1 each) along ``dim``, as ember.cat
    would join them."""

    def __init__(self, cseq, dim=0, lengths=None):
        self.cseq = list(cseq)
        if not all(isinstance(c, Constraint) for c in self.cseq):
            raise AssertionError("every element of cseq must be a Constraint")
        self.lengths = [1] * len(self.cseq) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.cseq):
            raise AssertionError(f"lengths ({len(self.lengths)}) must match cseq ({len(self.cseq)})")
        self.dim = dim

    @property
    def is_discrete(self):
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self):
        return max(c.event_dim for c in self.cseq)

    def check(self, value):
        starts = [sum(self.lengths[:i]) for i in range(len(self.lengths))]
        return ember.cat([c.check(value.narrow(self.dim, s, n)) for c, s, n in zip(self.cseq, starts, self.lengths)],
                         self.dim)


class _Stack(Constraint):
    """Constraint ``cseq[i]`` on ``value.select(dim, i)``, as ember.stack would join them."""

    def __init__(self, cseq, dim=0):
        self.cseq = list(cseq)
        if not all(isinstance(c, Constraint) for c in self.cseq):
            raise AssertionError("every element of cseq must be a Constraint")
        self.dim = dim

    @property
    def is_discrete(self):
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self):
        dim = max(c.event_dim for c in self.cseq)
        return dim + 1 if self.dim + dim < 0 else dim

    def check(self, value):
        return ember.stack([c.check(value.select(self.dim, i)) for i, c in enumerate(self.cseq)], self.dim)


class MixtureSameFamilyConstraint(Constraint):
    """The component distribution's constraint, checked on a value broadcast over the mixture's components."""

    def __init__(self, base_constraint):
        if not isinstance(base_constraint, Constraint):
            raise AssertionError(f"base_constraint must be a Constraint, got {type(base_constraint).__name__}")
        self.base_constraint = base_constraint

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim

    def check(self, value):
        if value.dim() < self.event_dim:
            raise ValueError(f"Expected value.dim() >= {self.event_dim} but got {value.dim()}")
        result = self.base_constraint.check(value.unsqueeze(-1 - self.event_dim))
        return result.reshape(result.shape[:value.dim() - self.event_dim] + (-1,)).all(-1)

    def __repr__(self):
        return f"{self.__class__.__name__}({self.base_constraint!r})"


dependent = _Dependent()
independent = _IndependentConstraint
boolean = _Boolean()
one_hot = _OneHot()
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
integer_interval = _IntegerInterval
real = _Real()
real_vector = independent(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
interval = _Interval
half_open_interval = _HalfOpenInterval
unit_interval = _Interval(0.0, 1.0)
simplex = _Simplex()
multinomial = _Multinomial
lower_triangular = _LowerTriangular()
lower_cholesky = _LowerCholesky()
corr_cholesky = _CorrCholesky()
square = _Square()
symmetric = _Symmetric()
positive_definite = _PositiveDefinite()
positive_semidefinite = _PositiveSemidefinite()
cat = _Cat
stack = _Stack


def is_dependent(constraint):
    """Whether ``constraint`` is a placeholder whose values cannot be checked."""
    return isinstance(constraint, _Dependent)
