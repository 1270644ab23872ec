"""numba loop of ``ember._fconv``'s float32 convolution (loaded through ``ember._jit`` only, never by ``import ember``;
used only where the CPU has AVX-512).

``conv`` reads each window of a channels-last padded input in place, through a table of the taps' byte offsets from
the window's start, and multiplies it by a weight packed as ``(panels, taps, 64)``: a tile of ``MR`` (or fewer)
outputs along an output row by one panel of 64 output channels keeps its ``MR * 4`` accumulators (16 floats each)
in registers through all the taps: per tap, four 64-byte loads of the weight, one broadcast per output and ``MR * 4``
fused multiply-adds. The tile is LLVM IR written here: numba's own loops leave the accumulators in memory, and
OpenBLAS's SkylakeX kernel, behind the im2col product, reaches half of what these tiles do on a 512-bit FMA core.
"""
import numba
from llvmlite import binding, ir
from numba.core import cgutils, types
from numba.core.extending import intrinsic

if not binding.get_host_cpu_features().get("avx512f", False):  # (ember._jit then leaves the convolutions as they are)
    raise ImportError("ember._fconv_loops needs AVX-512: its tiles hold 29 512-bit registers")

MR = 6  # outputs per tile: 6 x 4 accumulators, 4 weight vectors and a broadcast use 29 of the 32 registers
WIDTH = 64  # output channels per panel (4 vectors of 16 floats)
_I64, _I32 = ir.IntType(64), ir.IntType(32)
_F16 = ir.VectorType(ir.FloatType(), 16)
_LANES = ir.Constant(ir.VectorType(_I32, 16), None)  # (a shuffle mask of zeros: a broadcast of lane 0)


def _emit(builder, mr, args):
    """The IR of a tile of ``mr`` outputs (see ``tile``) at the builder's position; leaves it at the tile's end."""
    a, lda, b, init, c, ldc, taps, offsets = args
    const = lambda v: ir.Constant(_I64, v)  # noqa: E731
    i8p = ir.IntType(8).as_pointer()
    fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_F16, [_F16] * 3), "llvm.fma.v16f32")
    pa, pb, pc = (builder.inttoptr(v, i8p) for v in (a, b, c))
    table = builder.bitcast(builder.inttoptr(offsets, i8p), _I64.as_pointer())
    vector_at = lambda p, offset: builder.bitcast(builder.gep(p, [offset]), _F16.as_pointer())  # noqa: E731
    start = [builder.load(vector_at(builder.inttoptr(init, i8p), const(64 * j)), align=4) for j in range(4)]
    entry = builder.block
    loop, done = builder.append_basic_block(f"tile{mr}.loop"), builder.append_basic_block(f"tile{mr}.done")
    builder.cbranch(builder.icmp_signed(">", taps, const(0)), loop, done)

    builder.position_at_end(loop)
    t = builder.phi(_I64)
    acc = [[builder.phi(_F16) for _ in range(4)] for _ in range(mr)]
    t.add_incoming(const(0), entry)
    row = builder.mul(t, const(4 * WIDTH))
    bv = [builder.load(vector_at(pb, builder.add(row, const(64 * j))), align=4) for j in range(4)]
    tap = builder.load(builder.gep(table, [t]), align=8)
    new = []
    for r in range(mr):
        p = builder.gep(pa, [builder.add(tap, builder.mul(lda, const(r)))])
        v = builder.insert_element(ir.Constant(_F16, ir.Undefined),
                                   builder.load(builder.bitcast(p, ir.FloatType().as_pointer()), align=4),
                                   ir.Constant(_I32, 0))
        v = builder.shuffle_vector(v, ir.Constant(_F16, ir.Undefined), _LANES)
        new.append([builder.call(fma, [v, bv[j], acc[r][j]]) for j in range(4)])
    t_next = builder.add(t, const(1))
    t.add_incoming(t_next, loop)
    for r in range(mr):
        for j in range(4):
            acc[r][j].add_incoming(start[j], entry)
            acc[r][j].add_incoming(new[r][j], loop)
    builder.cbranch(builder.icmp_signed("<", t_next, taps), loop, done)

    builder.position_at_end(done)
    result = [[builder.phi(_F16) for _ in range(4)] for _ in range(mr)]
    for r in range(mr):
        for j in range(4):
            result[r][j].add_incoming(start[j], entry)
            result[r][j].add_incoming(new[r][j], loop)
            offset = builder.mul(builder.add(builder.mul(ldc, const(r)), const(16 * j)), const(4))
            builder.store(result[r][j], vector_at(pc, offset), align=4)


@intrinsic
def tile(typingctx, rows, a, lda, b, init, c, ldc, taps, offsets):
    """``tile(rows, a, lda, b, init, c, ldc, taps, offsets)`` on addresses: ``c[r, :64] = init + sum over taps t of
    a[r * lda + offsets[t]] * b[t, :]`` for the ``rows`` (1 to MR) outputs ``r`` (``a`` and ``lda`` in bytes,
    ``c``'s rows ``ldc`` floats apart, ``offsets`` int64 bytes): one block of IR per row count."""
    def codegen(context, builder, sig, args):
        end = builder.append_basic_block("tiles.end")
        cases = builder.switch(args[0], end)
        for mr in range(1, MR + 1):
            block = builder.append_basic_block(f"tiles.{mr}")
            cases.add_case(ir.Constant(_I64, mr), block)
            builder.position_at_end(block)
            _emit(builder, mr, args[1:])
            builder.branch(end)
        builder.position_at_end(end)
        return context.get_dummy_value()
    return types.void(*[types.intp] * 9), codegen


@numba.njit(cache=True, nogil=True)
def conv(x, b, init, offsets, c, out_h, out_w, row_step, col_step, n0, n1):
    """Images ``n0:n1`` of a 2-d convolution of ``x``, its channels-last padded float32 input (N, H, W, C):
    ``c[(n * out_h + y) * out_w + j] = init + sum over taps t of x[n][window(y, j) + offsets[t]] * b[:, t]``, where
    the window of output (y, j) starts ``y * row_step + j * col_step`` bytes into image n; ``b`` (panels, taps, 64),
    ``init`` (panels * 64,), ``c`` (rows, panels * 64)."""
    panels, taps = b.shape[0], b.shape[1]
    ldc = c.shape[1]
    image = x.shape[1] * x.shape[2] * x.shape[3] * 4
    table = offsets.ctypes.data
    for n in range(n0, n1):
        for y in range(out_h):
            line = x.ctypes.data + n * image + y * row_step
            first = (n * out_h + y) * out_w
            for p in range(panels):
                bp = b.ctypes.data + p * taps * WIDTH * 4
                ip = init.ctypes.data + p * WIDTH * 4
                for j in range(0, out_w, MR):
                    ap = line + j * col_step
                    cp = c.ctypes.data + ((first + j) * ldc + p * WIDTH) * 4
                    tile(min(MR, out_w - j), ap, col_step, bp, ip, cp, ldc, taps, table)
