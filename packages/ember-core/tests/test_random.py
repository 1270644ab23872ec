"""Random numbers: Generator and seeding, sampling functions and in-place samplers, checked against
PyTorch for dtypes, shapes and errors, and statistically for their distributions."""
import subprocess
import sys

import numpy as np
import pytest
import torch

import ember
import ember.random

# ---- dtypes and shapes against PyTorch ---------------------------------------------------------
# each case is called with the module (ember or torch) and returns a tensor
CREATION = {
    "rand": lambda m: m.rand(2, 3),
    "rand_tuple": lambda m: m.rand((2, 3)),
    "rand_f64": lambda m: m.rand(4, dtype=m.float64),
    "rand_half": lambda m: m.rand(4, dtype=m.float16),
    "rand_bf16": lambda m: m.rand(4, dtype=m.bfloat16),
    "rand_complex": lambda m: m.rand(4, dtype=m.complex64),
    "rand_empty": lambda m: m.rand(0, 3),
    "rand_scalar": lambda m: m.rand(()),
    "randn": lambda m: m.randn(5),
    "randn_complex": lambda m: m.randn(2, 2, dtype=m.complex128),
    "rand_like": lambda m: m.rand_like(m.zeros(2, 2, dtype=m.float64)),
    "randn_like": lambda m: m.randn_like(m.zeros(3, dtype=m.float16)),
    "randint_high": lambda m: m.randint(5, (3, 2)),
    "randint_low_high": lambda m: m.randint(-3, 5, (4,)),
    "randint_size_kw": lambda m: m.randint(5, size=(2,)),
    "randint_float": lambda m: m.randint(0, 10, (3,), dtype=m.float32),
    "randint_bool": lambda m: m.randint(0, 2, (3,), dtype=m.bool),
    "randint_uint8": lambda m: m.randint(0, 256, (3,), dtype=m.uint8),
    "randint_like": lambda m: m.randint_like(m.zeros(3, dtype=m.float16), 10),
    "randint_like_low": lambda m: m.randint_like(m.zeros(3, dtype=m.int32), 3, 10),
    "randperm": lambda m: m.randperm(6),
    "randperm_float": lambda m: m.randperm(6, dtype=m.float32),
    "normal_tt": lambda m: m.normal(m.zeros(3), m.ones(2, 1)),
    "normal_tf": lambda m: m.normal(m.zeros(3, dtype=m.float64), 2.0),
    "normal_ft": lambda m: m.normal(1.0, m.ones(4, dtype=m.float16)),
    "normal_t_default_std": lambda m: m.normal(m.zeros(2, 2)),
    "normal_mixed_dtypes": lambda m: m.normal(m.zeros(3), m.ones(3, dtype=m.float64)),
    "normal_size": lambda m: m.normal(0.0, 1.0, (2, 3)),
    "normal_size_dtype": lambda m: m.normal(0, 1, (2,), dtype=m.float64),
    "bernoulli": lambda m: m.bernoulli(m.full((3,), 0.5)),
    "bernoulli_p": lambda m: m.bernoulli(m.zeros(3, dtype=m.int64), 0.5),
    "bernoulli_half": lambda m: m.bernoulli(m.full((3,), 0.5, dtype=m.float16)),
    "bernoulli_method": lambda m: m.zeros(2, 2).bernoulli(0.3),
    "multinomial": lambda m: m.multinomial(m.ones(4), 2),
    "multinomial_2d": lambda m: m.multinomial(m.ones(3, 4), 6, True),
    "multinomial_empty_rows": lambda m: m.multinomial(m.ones(0, 3), 1),
    "multinomial_method": lambda m: m.ones(2, 5, dtype=m.float64).multinomial(3),
    "poisson": lambda m: m.poisson(m.full((2, 2), 3.0)),
    "poisson_f64": lambda m: m.poisson(m.ones(3, dtype=m.float64)),
}

INPLACE = {
    "uniform_": lambda m, d: m.zeros(3, dtype=d).uniform_(-2, 2),
    "normal_": lambda m, d: m.zeros(3, dtype=d).normal_(1, 2),
    "bernoulli_": lambda m, d: m.zeros(3, dtype=d).bernoulli_(0.3),
    "bernoulli_tensor": lambda m, d: m.zeros(2, 3, dtype=d).bernoulli_(m.full((3,), 0.5)),
    "random_": lambda m, d: m.zeros(3, dtype=d).random_(),
    "random_to": lambda m, d: m.zeros(3, dtype=d).random_(2),
    "random_from_to": lambda m, d: m.zeros(3, dtype=d).random_(1, 3),
    "exponential_": lambda m, d: m.zeros(3, dtype=d).exponential_(2),
    "geometric_": lambda m, d: m.zeros(3, dtype=d).geometric_(0.3),
    "log_normal_": lambda m, d: m.zeros(3, dtype=d).log_normal_(),
    "cauchy_": lambda m, d: m.zeros(3, dtype=d).cauchy_(),
}
DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int8", "uint8", "bool", "complex64"]


def _outcome(fn):
    """(dtype name, shape) of the result, or the exception type and message of the error."""
    try:
        r = fn()
    except Exception as e:  # noqa: BLE001 - the exception type is what is compared
        return type(e), str(e)
    return str(r.dtype).split(".")[-1], tuple(r.shape)


@pytest.mark.parametrize("name", CREATION)
def test_creation_dtype_and_shape_match_torch(name):
    assert _outcome(lambda: CREATION[name](ember)) == _outcome(lambda: CREATION[name](torch))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", INPLACE)
def test_inplace_dtype_support_matches_torch(name, dtype):
    mine = _outcome(lambda: INPLACE[name](ember, getattr(ember, dtype)))
    theirs = _outcome(lambda: INPLACE[name](torch, getattr(torch, dtype)))
    if isinstance(theirs[0], type):
        assert mine[0] is theirs[0], (mine, theirs)
    else:
        assert mine == theirs


# ---- errors against PyTorch: same exception type, and the message carries the given text ------------
ERRORS = {
    "rand_int": (lambda m: m.rand(2, dtype=m.int64), "not implemented for 'Long'"),
    "randn_bool": (lambda m: m.randn(2, dtype=m.bool), "not implemented for 'Bool'"),
    "rand_negative": (lambda m: m.rand(-1), "negative dimension -1"),
    "rand_float_size": (lambda m: m.rand(2.5), "must be tuple of ints"),
    "randint_order": (lambda m: m.randint(5, 3, (2,)),
                      "random_ expects 'from' to be less than 'to', but got from=5 >= to=3"),
    "randint_empty_range": (lambda m: m.randint(3, 3, (2,)), "but got from=3 >= to=3"),
    "randint_to_bound": (lambda m: m.randint(0, 300, (2,), dtype=m.uint8),
                         "to - 1 is out of bounds for unsigned char"),
    "randint_from_bound": (lambda m: m.randint(-1, 3, (2,), dtype=m.uint8), "from is out of bounds for unsigned char"),
    "randint_bool_bound": (lambda m: m.randint(0, 3, (2,), dtype=m.bool), "to - 1 is out of bounds for bool"),
    "randint_overflow": (lambda m: m.randint(0, 2 ** 63, (2,)), "Overflow"),
    "randint_no_size": (lambda m: m.randint(3), "randint()"),
    "randint_like_order": (lambda m: m.randint_like(m.zeros(2), 10, 3), "from=10 >= to=3"),
    "randperm_bool": (lambda m: m.randperm(5, dtype=m.bool), "\"randperm\" not implemented for 'Bool'"),
    "randperm_overflow": (lambda m: m.randperm(300, dtype=m.uint8), "without overflow"),
    "randperm_negative": (lambda m: m.randperm(-1), "negative dimension"),
    "normal_no_size": (lambda m: m.normal(0.0, 1.0), "normal()"),
    "normal_neg_std": (lambda m: m.normal(m.zeros(3), -1.0), "normal expects std >= 0.0, but found std -1"),
    "normal_neg_std_size": (lambda m: m.normal(0.0, -2.0, (2,)), "but found std -2"),
    "normal_neg_std_tensor": (lambda m: m.normal(0.0, -m.ones(2)), "normal expects all elements of std >= 0.0"),
    "normal_int_mean": (lambda m: m.normal(m.zeros(3, dtype=m.int64), 1.0), "not implemented for 'Long'"),
    "normal_broadcast": (lambda m: m.normal(m.zeros(3), m.ones(2)), "must match the size of tensor b (2)"),
    "normal_int_dtype": (lambda m: m.normal(0.0, 1.0, (2,), dtype=m.int64), "not implemented for 'Long'"),
    "bernoulli_range": (lambda m: m.bernoulli(m.full((3,), 2.0)), "Expected p_in >= 0 && p_in <= 1"),
    "bernoulli_nan": (lambda m: m.bernoulli(m.full((3,), float("nan"))), "Expected p_in >= 0 && p_in <= 1"),
    "bernoulli_int": (lambda m: m.bernoulli(m.zeros(3, dtype=m.int64)),
                      "\"bernoulli_tensor_cpu_p_\" not implemented for 'Long'"),
    "bernoulli_p_range": (lambda m: m.bernoulli(m.zeros(3), 1.5),
                          "bernoulli_ expects p to be in [0, 1], but got p=1.5"),
    "bernoulli__p_range": (lambda m: m.zeros(3).bernoulli_(-0.5), "but got p=-0.5"),
    "bernoulli__int_p": (lambda m: m.zeros(3).bernoulli_(m.zeros(3, dtype=m.int64)), "not implemented for 'Long'"),
    "bernoulli__shape": (lambda m: m.zeros(3).bernoulli_(m.zeros(2)), "3"),
    "multinomial_too_many": (lambda m: m.multinomial(m.ones(4), 5),
                             "cannot sample n_sample > prob_dist.size(-1) samples without replacement"),
    "multinomial_zero": (lambda m: m.multinomial(m.ones(4), 0), "cannot sample n_sample <= 0 samples"),
    "multinomial_3d": (lambda m: m.multinomial(m.ones(2, 2, 2), 1), "prob_dist must be 1 or 2 dim"),
    "multinomial_0d": (lambda m: m.multinomial(m.ones(()), 1), "prob_dist must be 1 or 2 dim"),
    "multinomial_zero_sum": (lambda m: m.multinomial(m.zeros(2, 4) + m.tensor([[1.0], [0.0]]), 1, True),
                             "invalid multinomial distribution (sum of probabilities <= 0)"),
    "multinomial_negative": (lambda m: m.multinomial(-m.ones(4), 1), "either `inf`, `nan` or element < 0"),
    "multinomial_inf": (lambda m: m.multinomial(m.full((4,), float("inf")), 1), "either `inf`, `nan`"),
    "multinomial_nan": (lambda m: m.multinomial(m.full((4,), float("nan")), 1, True), "either `inf`, `nan`"),
    "multinomial_int": (lambda m: m.multinomial(m.ones(4, dtype=m.int64), 1),
                        "multinomial only supports floating-point dtypes for input, got: Long"),
    "multinomial_float_n": (lambda m: m.multinomial(m.ones(4), 2.0), "must be int, not float"),
    "poisson_negative": (lambda m: m.poisson(-m.ones(3)), "invalid Poisson rate, expected rate to be non-negative"),
    "poisson_nan": (lambda m: m.poisson(m.full((3,), float("nan"))), "invalid Poisson rate"),
    "poisson_int": (lambda m: m.poisson(m.ones(3, dtype=m.int64)), "\"poisson_cpu\" not implemented for 'Long'"),
    "uniform_order": (lambda m: m.zeros(3).uniform_(3, 1),
                      "uniform_ expects to return a [from, to) range, but found from=3 > to=1"),
    "uniform_inf": (lambda m: m.zeros(3).uniform_(0, float("inf")), "to is out of bounds for float"),
    "uniform_half_bound": (lambda m: m.zeros(3, dtype=m.float16).uniform_(0, 1e5), "to is out of bounds for c10::Half"),
    "uniform_span": (lambda m: m.zeros(3).uniform_(-3e38, 3e38), "to-from to exceed the limit"),
    "normal__std": (lambda m: m.zeros(3).normal_(0, -1), "normal expects std >= 0.0, but found std -1"),
    "exponential_lambda": (lambda m: m.zeros(3).exponential_(0),
                           "exponential_ expects lambda > 0.0, but found lambda=0"),
    "geometric_p": (lambda m: m.zeros(3).geometric_(1), "geometric_ expects p to be in (0, 1), but got p=1"),
    "geometric_no_p": (lambda m: m.zeros(3).geometric_(), "p"),
    "log_normal_std": (lambda m: m.zeros(3).log_normal_(0, 0), "log_normal_ expects std > 0.0, but found std=0"),
    "cauchy_sigma": (lambda m: m.zeros(3).cauchy_(0, -1), "cauchy_ expects sigma > 0.0, but found sigma=-1"),
    "random_order": (lambda m: m.zeros(3).random_(5, 3), "but got from=5 >= to=3"),
    "random_to_zero": (lambda m: m.zeros(3).random_(0), "but got from=0 >= to=0"),
    "random_int8_from": (lambda m: m.zeros(3, dtype=m.int8).random_(-129, None),
                         "from is out of bounds for signed char"),
    "random_uint8_to": (lambda m: m.zeros(3, dtype=m.uint8).random_(0, 257),
                        "to - 1 is out of bounds for unsigned char"),
    "random_from_above": (lambda m: m.zeros(3).random_(2 ** 24 + 5, None),
                          "less than or equal to 'to_inc' casted to dtype, but got from=16777221 > to_inc=16777216"),
    "random_overflow": (lambda m: m.zeros(3, dtype=m.int64).random_(0, 2 ** 63), "Overflow"),
    "random_floats": (lambda m: m.zeros(3).random_(0.5, 5.5), ""),
    "seed_float": (lambda m: m.Generator().manual_seed(1.5), "manual_seed expected a long, but got float"),
    "seed_overflow": (lambda m: m.Generator().manual_seed(2 ** 64), "Overflow when unpacking long long"),
    "seed_underflow": (lambda m: m.Generator().manual_seed(-(2 ** 63) - 1), "Overflow when unpacking long long"),
    "meta_generator": (lambda m: m.Generator("meta"), "META device type not an accelerator."),
    "state_wrong_size": (lambda m: m.Generator().set_state(m.zeros(10, dtype=m.uint8)),
                         "found the input RNG state size to be 10"),
    "state_wrong_dtype": (lambda m: m.Generator().set_state(m.zeros(48, dtype=m.int64)), "RNG state must be a"),
    "state_not_tensor": (lambda m: m.Generator().set_state([1, 2]), "ByteTensor, but got list"),
}


@pytest.mark.parametrize("name", ERRORS)
def test_errors_match_torch(name):
    fn, text = ERRORS[name]
    with pytest.raises(Exception) as theirs:
        fn(torch)
    with pytest.raises(theirs.type) as mine:
        fn(ember)
    assert text in str(mine.value)
    assert text in str(theirs.value)


def test_float_randint_range_warns_as_torch():
    with pytest.warns(UserWarning, match=r"to - 1 is out of bounds \[-\(2\^24\), 2\^24\]"):
        ember.randint(0, 2 ** 24 + 2, (2,), dtype=ember.float32)
    with pytest.warns(UserWarning, match="2\\^11"):
        ember.zeros(3, dtype=ember.float16).random_(0, 5000)


# ---- Generator, seeding and state -------------------------------------------------------------
def test_generator_basics_match_torch():
    g, t = ember.Generator(), torch.Generator()
    assert g.initial_seed() == t.initial_seed() == 67280421310721
    assert g.device == ember.device("cpu") and str(g.device) == str(t.device)
    assert g.manual_seed(5) is g and g.initial_seed() == 5
    assert g.manual_seed(-1).initial_seed() == t.manual_seed(-1).initial_seed() == 2 ** 64 - 1
    assert g.set_state(g.get_state()) is g
    state = g.get_state()
    assert state.dtype == ember.uint8 and state.device == ember.device("cpu") and state.dim() == 1
    s = g.seed()
    assert 0 <= s < 2 ** 64 and g.initial_seed() == s


def test_manual_seed_module_functions():
    assert ember.manual_seed(7) is ember.default_generator
    assert ember.initial_seed() == 7 and ember.random.initial_seed() == 7
    a = ember.rand(5)
    ember.random.manual_seed(7)
    assert np.array_equal(ember.rand(5).numpy(), a.numpy())
    s = ember.seed()
    assert ember.initial_seed() == s == ember.default_generator.initial_seed()
    assert ember.manual_seed(3.0).initial_seed() == 3  # like torch.manual_seed, which calls int()


SAMPLERS = {
    "rand": lambda g: ember.rand(4, 3, generator=g),
    "rand_odd_float32": lambda g: ember.rand(3, generator=g),  # leaves NumPy's 32-bit buffer half used
    "rand_half": lambda g: ember.rand(5, dtype=ember.float16, generator=g),
    "randn": lambda g: ember.randn(7, generator=g),
    "randn_complex": lambda g: ember.randn(3, dtype=ember.complex64, generator=g),
    "randint": lambda g: ember.randint(-5, 5, (9,), generator=g),
    "randperm": lambda g: ember.randperm(10, generator=g),
    "normal": lambda g: ember.normal(ember.zeros(4), ember.ones(4), generator=g),
    "normal_size": lambda g: ember.normal(1.0, 2.0, (4,), generator=g),
    "bernoulli": lambda g: ember.bernoulli(ember.full((8,), 0.5), generator=g),
    "multinomial": lambda g: ember.multinomial(ember.ones(3, 6), 4, generator=g),
    "multinomial_replacement": lambda g: ember.multinomial(ember.ones(6), 8, True, generator=g),
    "poisson": lambda g: ember.poisson(ember.full((5,), 4.0), generator=g),
    "uniform_": lambda g: ember.zeros(5).uniform_(-1, 1, generator=g),
    "normal_": lambda g: ember.zeros(5).normal_(generator=g),
    "bernoulli_": lambda g: ember.zeros(5).bernoulli_(0.4, generator=g),
    "random_": lambda g: ember.zeros(5, dtype=ember.int64).random_(generator=g),
    "exponential_": lambda g: ember.zeros(5).exponential_(generator=g),
    "geometric_": lambda g: ember.zeros(5).geometric_(0.2, generator=g),
    "log_normal_": lambda g: ember.zeros(5).log_normal_(generator=g),
    "cauchy_": lambda g: ember.zeros(5).cauchy_(generator=g),
}


@pytest.mark.parametrize("name", SAMPLERS)
def test_same_seed_same_stream_and_state_round_trip(name):
    draw = SAMPLERS[name]
    g = ember.Generator().manual_seed(123)
    first = [draw(g).numpy().copy() for _ in range(2)]
    g.manual_seed(123)
    assert all(np.array_equal(draw(g).numpy(), f) for f in first)
    state = g.get_state()
    after = [draw(g).numpy().copy() for _ in range(3)]
    assert any(not np.array_equal(after[0], a) for a in after[1:])  # the stream moves on
    g.set_state(state)
    assert all(np.array_equal(draw(g).numpy(), a) for a in after)
    # a state moved into another generator continues the same stream there
    h = ember.Generator().set_state(state)
    assert h.initial_seed() == 123
    assert np.array_equal(draw(h).numpy(), after[0])


@pytest.mark.parametrize("name", ["rand", "randn", "randint", "uniform_", "multinomial"])
def test_default_generator_follows_manual_seed(name):
    draw = SAMPLERS[name]
    ember.manual_seed(99)
    a = draw(None).numpy().copy()
    ember.manual_seed(99)
    assert np.array_equal(draw(None).numpy(), a)
    assert not np.array_equal(draw(None).numpy(), a)  # the stream moved on


def test_different_seeds_and_generators_are_independent():
    g1, g2 = ember.Generator().manual_seed(1), ember.Generator().manual_seed(1)
    a = ember.rand(100, generator=g1).numpy()
    ember.rand(1000, generator=ember.Generator().manual_seed(1))  # other generators don't move g2
    ember.rand(1000)
    assert np.array_equal(ember.rand(100, generator=g2).numpy(), a)
    assert not np.array_equal(ember.rand(100, generator=ember.Generator().manual_seed(2)).numpy(), a)
    state = ember.get_rng_state()
    ember.rand(3, generator=g1)
    assert ember.get_rng_state().numpy().tobytes() == state.numpy().tobytes()


def test_rng_state_round_trip_of_default_generator():
    ember.manual_seed(0)
    ember.rand(3)
    state = ember.random.get_rng_state()
    a = ember.randn(6).numpy()
    assert ember.set_rng_state(state) is None
    assert np.array_equal(ember.randn(6).numpy(), a)
    assert ember.initial_seed() == 0


def test_fork_rng_restores_the_state():
    ember.manual_seed(5)
    before = ember.get_rng_state().numpy().copy()
    with ember.random.fork_rng():
        ember.rand(10)
        ember.manual_seed(1234)
        ember.randn(3)
    assert np.array_equal(ember.get_rng_state().numpy(), before)
    assert ember.initial_seed() == 5
    with ember.random.fork_rng(enabled=False):
        ember.rand(10)
    assert not np.array_equal(ember.get_rng_state().numpy(), before)
    with pytest.raises(ZeroDivisionError), ember.random.fork_rng(devices=[]):
        ember.rand(10)
        raise ZeroDivisionError
    ember.set_rng_state(ember.tensor(before))
    with ember.random.fork_rng(devices=[]):
        ember.rand(2)
    assert np.array_equal(ember.get_rng_state().numpy(), before)


def test_generator_argument_is_checked():
    with pytest.raises(TypeError):
        ember.rand(2, generator=object())
    with pytest.raises(TypeError):
        ember.zeros(2).uniform_(generator="cpu")


def test_import_and_seeding_do_not_import_cupy():
    code = ("import sys, ember, ember.random; ember.manual_seed(1); ember.seed(); ember.rand(2); "
            "ember.random.fork_rng().__enter__(); assert 'cupy' not in sys.modules, 'cupy imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- values and statistics (fixed seeds: deterministic) -----------------------------------------
N = 200_000


@pytest.fixture
def g():
    return ember.Generator().manual_seed(2024)


def _np(t):
    return t.numpy().astype(np.float64)


def _chi_square(counts, expected):
    """Pearson's statistic and a bound it exceeds with probability about 1e-6 (df + 7 sqrt(2 df))."""
    counts, expected = np.asarray(counts, np.float64), np.asarray(expected, np.float64)
    df = len(counts) - 1
    return ((counts - expected) ** 2 / expected).sum(), df + 7 * np.sqrt(2 * df)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_rand_uniform_on_unit_interval(g, dtype):
    x = _np(ember.rand(N, dtype=getattr(ember, dtype), generator=g))
    assert x.min() >= 0 and x.max() < 1  # half precision must never round up to 1
    assert abs(x.mean() - 0.5) < 0.01 and abs(x.var() - 1 / 12) < 0.005


def test_randn_moments(g):
    x = _np(ember.randn(N, generator=g))
    assert abs(x.mean()) < 0.01 and abs(x.var() - 1) < 0.02
    c = ember.randn(N, dtype=ember.complex64, generator=g).numpy()
    assert abs(c.real.var() - 0.5) < 0.01 and abs(c.imag.var() - 0.5) < 0.01 and abs(np.mean(c.real * c.imag)) < 0.01


def test_normal_overloads_moments(g):
    mean = ember.tensor([-5.0, 5.0]).reshape(2, 1)
    std = ember.ones(N // 10, 1, 3) * ember.tensor([0.5, 2.0, 3.0])
    x = _np(ember.normal(mean, std, generator=g))  # broadcast to (N // 10, 2, 3)
    assert np.allclose(x.mean(0), [[-5] * 3, [5] * 3], atol=0.05)
    assert np.allclose(x.std(0), [[0.5, 2, 3]] * 2, rtol=0.03)
    y = _np(ember.normal(3.0, 2.0, (N,), generator=g))
    assert abs(y.mean() - 3) < 0.03 and abs(y.std() - 2) < 0.03
    z = _np(ember.normal(ember.full((N,), -1.0), 0.5, generator=g))
    assert abs(z.mean() + 1) < 0.01 and abs(z.std() - 0.5) < 0.01
    assert np.array_equal(_np(ember.normal(2.0, ember.zeros(4), generator=g)), [2.0] * 4)


def test_randint_frequencies_chi_square(g):
    x = ember.randint(-3, 7, (N,), generator=g).numpy()
    assert x.min() == -3 and x.max() == 6
    stat, bound = _chi_square(np.bincount(x + 3), [N / 10] * 10)
    assert stat < bound
    full = ember.randint(-(2 ** 63), 2 ** 63 - 1, (1000,), generator=g).numpy()
    assert (full < 0).any() and (full > 2 ** 62).any()


def test_random_default_ranges(g):
    assert set(np.unique(ember.zeros(2000, dtype=ember.bool).random_(generator=g).numpy())) == {False, True}
    i8 = ember.zeros(20000, dtype=ember.int8).random_(generator=g).numpy()
    assert i8.min() == 0 and i8.max() == 127  # [0, max] inclusive, as PyTorch
    h = _np(ember.zeros(50000, dtype=ember.float16).random_(generator=g))
    assert h.min() >= 0 and h.max() <= 2 ** 11 and np.array_equal(h, np.round(h))
    t = ember.zeros(5000, dtype=ember.int16).random_(10, generator=g).numpy()
    assert t.min() == 0 and t.max() == 9
    u = ember.zeros(5000, dtype=ember.uint8).random_(250, None, generator=g).numpy()
    assert u.min() == 250 and u.max() == 255
    kw = ember.zeros(5000, dtype=ember.int64).random_(**{"from": -4, "to": -1}, generator=g).numpy()
    assert set(np.unique(kw)) == {-4, -3, -2}


def test_randperm_is_a_permutation(g):
    for n in (0, 1, 17, 1000):
        p = ember.randperm(n, generator=g).numpy()
        assert np.array_equal(np.sort(p), np.arange(n))
    # every element equally likely in the first place
    firsts = [ember.randperm(5, generator=g)[0].item() for _ in range(5000)]
    stat, bound = _chi_square(np.bincount(firsts, minlength=5), [1000] * 5)
    assert stat < bound


def test_multinomial_with_replacement_chi_square(g):
    probs = ember.tensor([[0.1, 0.0, 0.2, 0.7], [4.0, 3.0, 2.0, 1.0]])  # rows need not sum to 1
    x = ember.multinomial(probs, N // 4, replacement=True, generator=g).numpy()
    assert x.shape == (2, N // 4)
    assert not (x[0] == 1).any()  # zero-probability categories are never drawn
    for row, p in zip(x, probs.numpy()):
        stat, bound = _chi_square(np.bincount(row, minlength=4)[p > 0], (p / p.sum() * row.size)[p > 0])
        assert stat < bound


def test_multinomial_without_replacement(g):
    probs = ember.tensor([0.5, 0.25, 0.125, 0.125, 0.0])
    x = ember.multinomial(probs.expand(20000, 5).contiguous(), 4, generator=g).numpy()
    assert all(len(set(r)) == 4 for r in x[:500]) and not (x == 4).any()
    # the first draw follows the probabilities; the second is conditional on the first
    stat, bound = _chi_square(np.bincount(x[:, 0], minlength=4), [10000, 5000, 2500, 2500])
    assert stat < bound
    second = x[x[:, 0] == 0, 1]  # after drawing 0, the others keep their ratios 2:1:1
    stat, bound = _chi_square(np.bincount(second, minlength=4)[1:], np.array([0.5, 0.25, 0.25]) * second.size)
    assert stat < bound
    # zero-weight categories come only after every positive one
    assert set(ember.multinomial(ember.tensor([0.0, 1.0, 0.0]), 3, generator=g).numpy()[:1]) == {1}


def test_bernoulli_frequencies(g):
    p = ember.tensor([0.0, 0.1, 0.5, 0.9, 1.0], dtype=ember.float64)
    x = _np(ember.bernoulli(p.expand(N // 5, 5).contiguous(), generator=g))
    assert np.allclose(x.mean(0), p.numpy(), atol=0.01)
    assert x[:, 0].max() == 0 and x[:, 4].min() == 1
    y = _np(ember.zeros(N).bernoulli_(0.3, generator=g))
    assert abs(y.mean() - 0.3) < 0.01
    z = _np(ember.zeros(N // 2, 2).bernoulli_(ember.tensor([0.2, 0.8]), generator=g))
    assert np.allclose(z.mean(0), [0.2, 0.8], atol=0.01)
    assert abs(_np(ember.bernoulli(ember.zeros(N), 0.25, generator=g)).mean() - 0.25) < 0.01


def test_poisson_moments(g):
    x = _np(ember.poisson(ember.full((N,), 4.0), generator=g))
    assert np.array_equal(x, np.round(x)) and abs(x.mean() - 4) < 0.05 and abs(x.var() - 4) < 0.1
    assert _np(ember.poisson(ember.zeros(10), generator=g)).max() == 0


def test_inplace_distributions(g):
    u = _np(ember.empty(N).uniform_(-2, 6, generator=g))
    assert u.min() >= -2 and u.max() < 6 and abs(u.mean() - 2) < 0.05
    c = ember.zeros(N, dtype=ember.complex64).uniform_(3, 5, generator=g).numpy()
    assert c.real.min() >= 3 and c.imag.min() >= 3 and c.imag.max() < 5  # both parts shifted, as PyTorch
    n = _np(ember.empty(N, dtype=ember.float64).normal_(1.5, 0.5, generator=g))
    assert abs(n.mean() - 1.5) < 0.01 and abs(n.std() - 0.5) < 0.01
    cn = ember.zeros(N, dtype=ember.complex64).normal_(3, 2, generator=g).numpy()
    assert abs(cn.imag.mean() - 3) < 0.02 and abs(cn.real.std() - np.sqrt(2)) < 0.02
    e = _np(ember.empty(N).exponential_(4.0, generator=g))
    assert e.min() >= 0 and abs(e.mean() - 0.25) < 0.005 and abs(e.std() - 0.25) < 0.005
    geo = _np(ember.empty(N, dtype=ember.int64).geometric_(0.25, generator=g))
    assert geo.min() == 1 and abs(geo.mean() - 4) < 0.05 and abs((geo == 1).mean() - 0.25) < 0.01
    ln = _np(ember.empty(N).log_normal_(0.5, 0.25, generator=g))
    assert ln.min() > 0 and abs(np.log(ln).mean() - 0.5) < 0.005 and abs(np.log(ln).std() - 0.25) < 0.005
    ca = _np(ember.empty(N).cauchy_(2.0, 3.0, generator=g))
    assert abs(np.median(ca) - 2) < 0.05 and abs(np.percentile(ca, 75) - 5) < 0.1  # quartiles at median +- sigma


def test_inplace_samplers_write_through_views_and_bump_version(g):
    base = ember.zeros(4, 6)
    view = base[:, ::2]
    v0 = base._version[0]
    assert view.uniform_(5, 6, generator=g) is view
    assert base._version[0] > v0
    b = base.numpy()
    assert (b[:, ::2] >= 5).all() and (b[:, 1::2] == 0).all()
    for method, args in [("normal_", ()), ("bernoulli_", (0.5,)), ("random_", (3,)), ("exponential_", ()),
                         ("geometric_", (0.5,)), ("log_normal_", ()), ("cauchy_", ())]:
        t = ember.zeros(3)
        before = t._version[0]
        assert getattr(t, method)(*args, generator=g) is t and t._version[0] == before + 1


def test_out_arguments(g):
    out = ember.empty(2, 3, dtype=ember.float64)
    assert ember.rand(2, 3, out=out, generator=g) is out and out.dtype == ember.float64
    assert (out.numpy() < 1).all()
    iout = ember.empty(4, dtype=ember.int64)
    assert ember.randint(3, (4,), out=iout, generator=g) is iout and iout.numpy().max() < 3
    nout = ember.empty(3)
    assert ember.normal(ember.zeros(3), 1.0, out=nout, generator=g) is nout
    mout = ember.empty(2, dtype=ember.int64)
    assert ember.multinomial(ember.ones(4), 2, out=mout, generator=g) is mout
    pout = ember.empty(5, dtype=ember.int64)
    assert ember.randperm(5, out=pout, generator=g) is pout
    assert np.array_equal(np.sort(pout.numpy()), np.arange(5))


def test_default_dtype_is_respected():
    ember.set_default_dtype(ember.float64)
    try:
        assert ember.rand(2).dtype == ember.float64 and ember.randn(2).dtype == ember.float64
        assert ember.normal(0.0, 1.0, (2,)).dtype == ember.float64
        assert ember.randint(3, (2,)).dtype == ember.int64
    finally:
        ember.set_default_dtype(ember.float32)


# ---- CUDA --------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_cuda_generator_state_round_trip():
    g = ember.Generator("cuda").manual_seed(11)
    assert g.device.type == "cuda" and g.device.index is not None
    a = ember.rand(1000, device="cuda", generator=g)
    assert a.device.type == "cuda" and a.dtype == ember.float32
    state = g.get_state()
    assert state.dtype == ember.uint8 and state.device == ember.device("cpu")
    b = ember.randn(1000, device="cuda", generator=g).cpu().numpy()
    g.set_state(state)
    assert np.array_equal(ember.randn(1000, device="cuda", generator=g).cpu().numpy(), b)
    g.manual_seed(11)
    assert np.array_equal(ember.rand(1000, device="cuda", generator=g).cpu().numpy(), a.cpu().numpy())
    with pytest.raises(RuntimeError, match="Expected a 'cpu' device type for generator but found 'cuda'"):
        ember.rand(2, generator=g)


@pytest.mark.gpu
def test_cuda_sampling_functions():
    ember.manual_seed(3)
    x = ember.rand(N, device="cuda").cpu().numpy()
    assert x.min() >= 0 and x.max() < 1 and abs(x.mean() - 0.5) < 0.01
    ember.manual_seed(3)
    assert np.array_equal(ember.rand(N, device="cuda").cpu().numpy(), x)
    n = ember.randn(N, device="cuda").cpu().numpy()
    assert abs(n.mean()) < 0.01 and abs(n.var() - 1) < 0.02
    r = ember.randint(-3, 7, (N,), device="cuda").cpu().numpy()
    assert r.min() == -3 and r.max() == 6
    assert np.array_equal(np.sort(ember.randperm(100, device="cuda").cpu().numpy()), np.arange(100))
    t = ember.zeros(N, device="cuda")
    for method, args in [("uniform_", (-1, 1)), ("normal_", ()), ("bernoulli_", (0.3,)), ("random_", (5,)),
                         ("exponential_", ()), ("geometric_", (0.5,)), ("log_normal_", ()), ("cauchy_", ())]:
        assert getattr(t, method)(*args) is t and t.device.type == "cuda"
    m = ember.multinomial(ember.ones(3, 5, device="cuda"), 5).cpu().numpy()
    assert all(sorted(row) == list(range(5)) for row in m)
    assert ember.multinomial(ember.tensor([0.0, 1.0], device="cuda"), 4, True).cpu().numpy().tolist() == [1] * 4
    assert abs(ember.bernoulli(ember.full((N,), 0.25, device="cuda")).cpu().numpy().mean() - 0.25) < 0.01
    assert abs(ember.poisson(ember.full((N,), 3.0, device="cuda")).cpu().numpy().mean() - 3) < 0.05


@pytest.mark.gpu
def test_cuda_fork_rng_and_seeding():
    ember.manual_seed(8)
    g = ember._random.cuda_default_generator()
    assert g.initial_seed() == 8
    state = g.get_state().numpy().copy()
    with ember.random.fork_rng():
        ember.rand(10, device="cuda")
    assert np.array_equal(g.get_state().numpy(), state)
