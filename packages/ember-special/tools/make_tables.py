#!/usr/bin/env python3
"""Writes src/ember/special/_tables.py: values from mpmath (50 digits) that the kernels start from.

    python packages/ember-special/tools/make_tables.py
"""
import pathlib

import mpmath

mpmath.mp.dps = 50
# Airy Ai and Ai' at the centres of the Taylor expansions the Airy kernels use (step 1/2)
AIRY_LO, AIRY_HI = -14, 10
centres = [AIRY_LO + k / 2 for k in range(2 * (AIRY_HI - AIRY_LO) + 1)]
ai = [float(mpmath.airyai(c)) for c in centres]
aip = [float(mpmath.airyai(c, derivative=1)) for c in centres]
# Taylor coefficients of digamma about its positive root x0: (-1)^(k+1) zeta(k+1, x0), k = 1..40
root = mpmath.findroot(mpmath.digamma, 1.46)
digamma_root = [float((-1) ** (k + 1) * mpmath.zeta(k + 1, root)) for k in range(1, 41)]
out = pathlib.Path(__file__).resolve().parents[1] / "src" / "ember" / "special" / "_tables.py"
out.write_text(
    '"""Tables for the scalar kernels, written by tools/make_tables.py from mpmath at 50 digits."""\n'
    f"AIRY_LO, AIRY_HI = {AIRY_LO}, {AIRY_HI}  # Taylor centres AIRY_LO, AIRY_LO + 1/2, ..., AIRY_HI\n"
    f"AIRY_AI = {tuple(ai)!r}\n"
    f"AIRY_AIP = {tuple(aip)!r}\n"
    f"DIGAMMA_ROOT = {float(root)!r}, {float(root - float(root))!r}  # the positive root as a double plus rest\n"
    f"DIGAMMA_ROOT_SERIES = {tuple(digamma_root)!r}\n")
print(out)
