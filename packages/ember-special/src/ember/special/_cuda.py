"""ember-special's CuPy kernels, registered in ``ember._kernels`` (so ``nox -s kernels`` compiles
them and the host test checks them against the CPU path).

The C++ functions below are the CUDA twins of the CPU's scalar kernels (``_scalar``, ``_poly``: same
algorithms, same edge cases, computing in double), and for i0e/i1e and spherical Bessel j0 (which
the CPU takes from SciPy and NumPy) series of their own; cupyx has no Airy function, spherical
Bessel j0 or orthogonal polynomials, and its i0e/i1e overflow for large arguments.
"""
from ember import _kernels

from ._tables import AIRY_AI, AIRY_AIP, AIRY_HI, AIRY_LO


def _array(name, values):
    return f"__device__ static const double {name}[{len(values)}] = {{{', '.join(repr(v) for v in values)}}};\n"


PREAMBLE = _array("ember_airy_ai_tab", AIRY_AI) + _array("ember_airy_aip_tab", AIRY_AIP) + f"""
#define EMBER_AIRY_LO {AIRY_LO:.1f}
#define EMBER_AIRY_HI {AIRY_HI:.1f}
#define EMBER_PI 3.141592653589793
// NVRTC has no <cmath> macros: infinity and NaN made by IEEE arithmetic, which host and device share
__device__ inline double ember_inf() {{ volatile double zero = 0.0; return 1.0 / zero; }}
__device__ inline double ember_nan() {{ volatile double zero = 0.0; return zero / zero; }}
#ifndef INFINITY
#define INFINITY (ember_inf())
#endif
#ifndef NAN
#define NAN (ember_nan())
#endif
__device__ inline double ember_airy_ai(double x) {{
  if (isnan(x) || x == INFINITY) return NAN;  // PyTorch gives NaN at +inf
  if (x > EMBER_AIRY_HI + 0.25) {{
    double zeta = 2.0 / 3.0 * x * sqrt(x), total = 1.0, u = 1.0, p = 1.0;
    for (int k = 1; k < 40; ++k) {{
      u *= (6.0 * k - 5) * (6.0 * k - 3) * (6.0 * k - 1) / (216.0 * k * (2.0 * k - 1));
      p /= -zeta;
      total += u * p;
      if (fabs(u * p) < 1e-17) break;
    }}
    return exp(-zeta) / (2.0 * sqrt(EMBER_PI) * sqrt(sqrt(x))) * total;
  }}
  if (x < EMBER_AIRY_LO - 0.25) {{
    double z = -x, zeta = 2.0 / 3.0 * z * sqrt(z), even = 1.0, odd = 0.0, u = 1.0, p = 1.0;
    for (int k = 1; k < 40; ++k) {{
      u *= (6.0 * k - 5) * (6.0 * k - 3) * (6.0 * k - 1) / (216.0 * k * (2.0 * k - 1));
      p /= zeta;
      double term = (k % 4 < 2) ? u * p : -u * p;
      if (k % 2 == 0) even += term; else odd += term;
      if (u * p < 1e-17) break;
    }}
    double theta = zeta - 0.25 * EMBER_PI;
    return (cos(theta) * even + sin(theta) * odd) / (sqrt(EMBER_PI) * sqrt(sqrt(z)));
  }}
  int i = (int)floor((x - EMBER_AIRY_LO) * 2.0 + 0.5);
  double c = EMBER_AIRY_LO + 0.5 * i, h = x - c;
  double prev = 0.0, a = ember_airy_ai_tab[i], b = ember_airy_aip_tab[i], total = a + b * h, hk = h;
  for (int k = 0; k < 30; ++k) {{
    double nxt = (c * a + prev) / ((k + 2.0) * (k + 1.0));
    prev = a; a = b; b = nxt;
    hk *= h;
    total += nxt * hk;
  }}
  return total;
}}

__device__ inline double ember_spherical_bessel_j0(double x) {{
  if (isinf(x)) return 0.0;
  if (fabs(x) < 0.5) {{
    double x2 = x * x;
    return 1.0 - x2 / 6.0 * (1.0 - x2 / 20.0 * (1.0 - x2 / 42.0 * (1.0 - x2 / 72.0 * (1.0 - x2 / 110.0 * (
        1.0 - x2 / 156.0 * (1.0 - x2 / 210.0))))));
  }}
  return sin(x) / x;
}}

// exp(-|x|) I_order(|x|), order 0 or 1: power series below 30, asymptotic expansion above
__device__ inline double ember_bessel_ie(int order, double x) {{
  double ax = fabs(x);
  if (ax < 30.0) {{
    double q = 0.25 * ax * ax, term = order == 0 ? 1.0 : 0.5 * ax, total = term, k = 1.0;
    while (term > 1e-17 * total) {{
      term *= q / (k * (k + order));
      total += term;
      k += 1.0;
    }}
    return total * exp(-ax);
  }}
  double mu = 4.0 * order * order, term = 1.0, total = 1.0;
  for (double k = 1.0; k < 60.0; k += 1.0) {{
    term *= -(mu - (2 * k - 1) * (2 * k - 1)) / (k * 8.0 * ax);
    total += term;
    if (fabs(term) < 1e-17 * fabs(total)) break;
  }}
  return total / sqrt(2.0 * EMBER_PI * ax);
}}

__device__ inline double ember_i0e(double x) {{
  return isnan(x) ? x : (isinf(x) ? 0.0 : ember_bessel_ie(0, x));
}}

__device__ inline double ember_i1e(double x) {{
  if (isnan(x)) return x;
  if (isinf(x)) return copysign(0.0, x);
  return copysign(ember_bessel_ie(1, x), x);
}}

// orthogonal polynomials: recurrences in double-double arithmetic, as in _poly
__device__ inline void ember_two_sum(double a, double b, double& s, double& e) {{
  s = a + b;
  double t = s - a;
  e = (a - (s - t)) + (b - t);
}}
__device__ inline void ember_two_prod(double a, double b, double& p, double& e) {{
  p = a * b;
  double t = 134217729.0 * a, ah = t - (t - a), al = a - ah;
  t = 134217729.0 * b;
  double bh = t - (t - b), bl = b - bh;
  e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
}}
__device__ inline void ember_dd_mul(double ah, double al, double bh, double bl, double& h, double& l) {{
  double p, e;
  ember_two_prod(ah, bh, p, e);
  ember_two_sum(p, e + (ah * bl + al * bh), h, l);
}}
__device__ inline void ember_dd_add(double ah, double al, double bh, double bl, double& h, double& l) {{
  double s, e;
  ember_two_sum(ah, bh, s, e);
  ember_two_sum(s, e + al + bl, h, l);
}}
__device__ inline void ember_dd_div(double ah, double al, double b, double& h, double& l) {{
  double q = ah / b, p, e;
  ember_two_prod(q, b, p, e);
  ember_two_sum(q, ((ah - p) - e + al) / b, h, l);
}}

// kinds: 0..3 Chebyshev T, U, V, W; 4 Hermite H; 5 Hermite He; 6 Laguerre; 7 Legendre
__device__ inline double ember_plain(int kind, double x, long long n) {{  // in double: for infinite x
  double a = kind <= 4 ? 2.0 * x : x, p = 1.0, r;
  double q = (kind == 1 || kind == 4) ? a : kind == 2 ? a - 1.0 : kind == 3 ? a + 1.0 : kind == 6 ? 1.0 - x : x;
  for (long long k = 1; k < n; ++k) {{
    if (kind <= 3) r = a * q - p;
    else if (kind == 4) r = a * q - 2.0 * k * p;
    else if (kind == 5) r = a * q - k * p;
    else if (kind == 6) r = ((2.0 * k + 1.0 - x) * q - k * p) / (k + 1.0);
    else r = ((2.0 * k + 1.0) * x * q - k * p) / (k + 1.0);
    p = q; q = r;
  }}
  return q;
}}

__device__ inline double ember_polynomial(int kind, double xh, double xl, long long n) {{
  if (!isfinite(xh)) return ember_plain(kind, xh, n);  // IEEE arithmetic on infinities, as PyTorch's
  double ah = xh, al = xl, ph = 1.0, pl = 0.0, qh, ql, th, tl, uh, ul, rh, rl, ch, cl;
  if (kind <= 4) {{ ah = 2.0 * xh; al = 2.0 * xl; }}
  if (kind == 1 || kind == 4) {{ qh = ah; ql = al; }}
  else if (kind == 2) ember_dd_add(ah, al, -1.0, 0.0, qh, ql);
  else if (kind == 3) ember_dd_add(ah, al, 1.0, 0.0, qh, ql);
  else if (kind == 6) ember_dd_add(1.0, 0.0, -xh, -xl, qh, ql);
  else {{ qh = xh; ql = xl; }}
  for (long long k = 1; k < n; ++k) {{
    if (kind <= 3) {{
      ember_dd_mul(ah, al, qh, ql, th, tl);
      ember_dd_add(th, tl, -ph, -pl, rh, rl);
    }} else if (kind == 4 || kind == 5) {{
      ember_dd_mul(ah, al, qh, ql, th, tl);
      ember_dd_mul(ph, pl, (kind == 4 ? 2.0 : 1.0) * k, 0.0, uh, ul);
      ember_dd_add(th, tl, -uh, -ul, rh, rl);
    }} else {{
      if (kind == 6) ember_dd_add(2.0 * k + 1.0, 0.0, -xh, -xl, ch, cl);
      else ember_dd_mul(xh, xl, 2.0 * k + 1.0, 0.0, ch, cl);
      ember_dd_mul(ch, cl, qh, ql, th, tl);
      ember_dd_mul(ph, pl, (double)k, 0.0, uh, ul);
      ember_dd_add(th, tl, -uh, -ul, rh, rl);
      ember_dd_div(rh, rl, k + 1.0, rh, rl);
    }}
    ph = qh; pl = ql; qh = rh; ql = rl;
  }}
  return qh + ql;
}}

__device__ inline double ember_chebyshev(int kind, double xh, double xl, double n_) {{
  long long n = isfinite(n_) ? (long long)n_ : -1;
  if (n < 0) return 0.0;
  if (xl == 0.0 && fabs(xh) == 1.0) {{
    bool odd = n % 2 == 1;
    if (kind == 0) return (xh < 0 && odd) ? -1.0 : 1.0;
    if (kind == 1) return (xh < 0 && odd) ? -(n + 1.0) : n + 1.0;
    if (kind == 2) return xh > 0 ? 1.0 : (odd ? -(2.0 * n + 1.0) : 2.0 * n + 1.0);
    return xh > 0 ? 2.0 * n + 1.0 : (odd ? -1.0 : 1.0);
  }}
  return n == 0 ? 1.0 : ember_polynomial(kind, xh, xl, n);
}}
__device__ inline double ember_shifted(int kind, double x, double n) {{
  double h, l;
  ember_two_sum(2.0 * x, -1.0, h, l);
  return ember_chebyshev(kind, h, l, n);
}}
__device__ inline double ember_other(int kind, double x, double n_) {{
  long long n = isfinite(n_) ? (long long)n_ : -1;
  if (n < 0) return 0.0;
  if (n == 0 || (kind == 6 && x == 0.0)) return 1.0;
  if (kind == 7 && fabs(x) == 1.0) return (x < 0 && n % 2 == 1) ? -1.0 : 1.0;
  return ember_polynomial(kind, x, 0.0, n);
}}
__device__ inline double ember_chebyshev_t(double x, double n) {{ return ember_chebyshev(0, x, 0.0, n); }}
__device__ inline double ember_chebyshev_u(double x, double n) {{ return ember_chebyshev(1, x, 0.0, n); }}
__device__ inline double ember_chebyshev_v(double x, double n) {{ return ember_chebyshev(2, x, 0.0, n); }}
__device__ inline double ember_chebyshev_w(double x, double n) {{ return ember_chebyshev(3, x, 0.0, n); }}
__device__ inline double ember_shifted_chebyshev_t(double x, double n) {{ return ember_shifted(0, x, n); }}
__device__ inline double ember_shifted_chebyshev_u(double x, double n) {{ return ember_shifted(1, x, n); }}
__device__ inline double ember_shifted_chebyshev_v(double x, double n) {{ return ember_shifted(2, x, n); }}
__device__ inline double ember_shifted_chebyshev_w(double x, double n) {{ return ember_shifted(3, x, n); }}
__device__ inline double ember_hermite_h(double x, double n) {{ return ember_other(4, x, n); }}
__device__ inline double ember_hermite_he(double x, double n) {{ return ember_other(5, x, n); }}
__device__ inline double ember_laguerre_l(double x, double n) {{ return ember_other(6, x, n); }}
__device__ inline double ember_legendre_p(double x, double n) {{ return ember_other(7, x, n); }}
"""

UNARY = ("airy_ai", "spherical_bessel_j0", "i0e", "i1e")
BINARY = ("chebyshev_t", "chebyshev_u", "chebyshev_v", "chebyshev_w", "shifted_chebyshev_t", "shifted_chebyshev_u",
          "shifted_chebyshev_v", "shifted_chebyshev_w", "hermite_h", "hermite_he", "laguerre_l", "legendre_p")

# kernel name -> its CuPy kernel
KERNELS = {name: _kernels.elementwise_kernel(f"ember_special_{name}", "T x", "T y",
                                             f"y = (T)ember_{name}((double)x)", preamble=PREAMBLE)
           for name in UNARY}
KERNELS.update({name: _kernels.elementwise_kernel(f"ember_special_{name}", "T x, T n", "T y",
                                                  f"y = (T)ember_{name}((double)x, (double)n)", preamble=PREAMBLE)
                for name in BINARY})
