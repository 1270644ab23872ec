"""Calls of the ops of the CPU autocast tables, written once against the torch-compatible API.

``CPU_CASES[key](L, t)`` calls the op of table key ``key`` through library ``L`` (torch or ember);
``t`` makes its inputs (see ``Inputs``) in the dtype under test, from the same seeded values for both
libraries. The result is a tensor or a tuple of tensors.
"""
import numpy as np


class Inputs:
    """Tensors of one dtype from seeded float64 values; the same seed gives the same values in torch and ember."""

    def __init__(self, L, dtype, seed=0):
        self.L, self.dtype, self.rng = L, dtype, np.random.default_rng(seed)

    def of(self, a, dtype=None):
        return self.L.tensor(np.asarray(a, dtype=np.float64)).to(dtype or self.dtype)

    def __call__(self, *shape):
        return self.of(self.rng.standard_normal(shape))

    def pos(self, *shape):
        return self.of(self.rng.uniform(0.2, 1.0, shape))

    def prob(self, *shape):
        return self.of(self.rng.uniform(0.05, 0.95, shape))

    def spd(self, n, batch=()):
        a = self.rng.standard_normal(batch + (n, n))
        return self.of(a @ np.swapaxes(a, -1, -2) + n * np.eye(n))

    def well(self, *shape):  # well-conditioned square matrices
        return self.of(self.rng.standard_normal(shape) * 0.3 + 3 * np.eye(shape[-1]))

    def long(self, a):
        return self.L.tensor(np.asarray(a, dtype=np.int64))

    def f32(self, *shape):
        return self.of(self.rng.standard_normal(shape), self.L.float32)

    def bf16(self, *shape):
        return self.of(self.rng.standard_normal(shape), self.L.bfloat16)


def _F(L):
    return L.nn.functional


def _tri(L, t):
    return L.triu(t.well(4, 4))


CPU_CASES = {
    # lower precision
    "conv1d": lambda L, t: _F(L).conv1d(t(2, 3, 8), t(4, 3, 3)),
    "conv2d": lambda L, t: _F(L).conv2d(t(2, 3, 6, 6), t(4, 3, 3, 3), t(4)),
    "conv3d": lambda L, t: _F(L).conv3d(t(1, 2, 5, 5, 5), t(3, 2, 2, 2, 2)),
    "conv_transpose1d": lambda L, t: _F(L).conv_transpose1d(t(2, 3, 6), t(3, 4, 3)),
    "conv_transpose2d": lambda L, t: _F(L).conv_transpose2d(t(2, 3, 5, 5), t(3, 2, 3, 3), t(2)),
    "conv_transpose3d": lambda L, t: _F(L).conv_transpose3d(t(1, 2, 4, 4, 4), t(2, 3, 2, 2, 2)),
    "convolution": lambda L, t: L.convolution(t(2, 3, 6), t(4, 3, 3), None, [1], [0], [1], False, [0], 1),
    "conv_tbc": lambda L, t: _F(L).conv_tbc(t(10, 7, 3), t(5, 3, 5), t(5), 0),
    "bmm": lambda L, t: L.bmm(t(2, 3, 4), t(2, 4, 5)),
    "mm": lambda L, t: L.mm(t(3, 4), t(4, 5)),
    "matmul": lambda L, t: L.matmul(t(2, 3, 4), t(4, 5)),
    "baddbmm": lambda L, t: L.baddbmm(t(2, 3, 5), t(2, 3, 4), t(2, 4, 5)),
    "addmm": lambda L, t: L.addmm(t(3, 5), t(3, 4), t(4, 5)),
    "addbmm": lambda L, t: L.addbmm(t(3, 5), t(2, 3, 4), t(2, 4, 5)),
    "linalg_vecdot": lambda L, t: L.linalg.vecdot(t(3, 4), t(3, 4)),
    "linear": lambda L, t: _F(L).linear(t(3, 4), t(5, 4), t(5)),
    "prelu": lambda L, t: _F(L).prelu(t(2, 3, 4), t(3)),
    "einsum": lambda L, t: L.einsum("bij,bjk->bik", t(2, 3, 4), t(2, 4, 5)),
    "tensordot": lambda L, t: L.tensordot(t(2, 3, 4), t(4, 3, 5), dims=([1, 2], [1, 0])),
    "chain_matmul": lambda L, t: L.chain_matmul(t(2, 3), t(3, 4), t(4, 2)),
    "linalg_multi_dot": lambda L, t: L.linalg.multi_dot([t(2, 3), t(3, 4), t(4, 2)]),
    "scaled_dot_product_attention": lambda L, t: _F(L).scaled_dot_product_attention(t(2, 3, 4), t(2, 5, 4),
                                                                                    t(2, 5, 6)),
    # float32
    "avg_pool3d": lambda L, t: _F(L).avg_pool3d(t(1, 2, 4, 4, 4), 2),
    "binary_cross_entropy": lambda L, t: _F(L).binary_cross_entropy(t.prob(4, 3), t.prob(4, 3)),
    "grid_sample": lambda L, t: _F(L).grid_sample(t(1, 2, 4, 4), t.prob(1, 3, 3, 2) * 2 - 1, align_corners=False),
    "polar": lambda L, t: L.polar(t.pos(5), t(5)),
    "prod": lambda L, t: L.prod(t(3, 4), 1),
    "quantile": lambda L, t: L.quantile(t(3, 4), 0.3, dim=1),
    "nanquantile": lambda L, t: L.nanquantile(t(3, 4), 0.6),
    "stft": lambda L, t: L.stft(t(16), 8, window=L.hann_window(8).to(t.dtype), return_complex=True),
    "cdist": lambda L, t: L.cdist(t(3, 4), t(5, 4)),
    "trace": lambda L, t: L.trace(t(4, 4)),
    "view_as_complex": lambda L, t: L.view_as_complex(t(3, 2)),
    "cholesky": lambda L, t: L.cholesky(t.spd(3)),
    "cholesky_inverse": lambda L, t: L.cholesky_inverse(L.tril(t.well(3, 3))),
    "cholesky_solve": lambda L, t: L.cholesky_solve(t(3, 2), L.tril(t.well(3, 3))),
    "inverse": lambda L, t: L.inverse(t.well(3, 3)),
    "lu_solve": lambda L, t: L.lu_solve(t(3, 2), *L.linalg.lu_factor(t.well(3, 3).double()).__iter__()),
    "orgqr": lambda L, t: L.orgqr(*L.geqrf(t(4, 3))),
    "ormqr": lambda L, t: L.ormqr(*L.geqrf(t(4, 3)), t(4, 2)),
    "pinverse": lambda L, t: L.pinverse(t(4, 3)),
    "max_pool3d": lambda L, t: _F(L).max_pool3d(t(1, 2, 4, 4, 4), 2),
    "max_unpool2d": lambda L, t: _F(L).max_unpool2d(*_F(L).max_pool2d(t(1, 2, 4, 4), 2, return_indices=True), 2),
    "max_unpool3d": lambda L, t: _F(L).max_unpool3d(*_F(L).max_pool3d(t(1, 1, 4, 4, 4), 2, return_indices=True), 2),
    "adaptive_avg_pool3d": lambda L, t: _F(L).adaptive_avg_pool3d(t(1, 2, 4, 4, 4), 2),
    "adaptive_max_pool3d": lambda L, t: _F(L).adaptive_max_pool3d(t(1, 2, 4, 4, 4), 2),
    "fractional_max_pool2d": lambda L, t: _F(L).fractional_max_pool2d(
        t(1, 2, 6, 6), 2, output_size=3, _random_samples=t.prob(1, 2, 2)),
    "fractional_max_pool3d": lambda L, t: _F(L).fractional_max_pool3d(
        t(1, 2, 6, 6, 6), 2, output_size=3, _random_samples=t.prob(1, 2, 3)),
    "pad": lambda L, t: _F(L).pad(t(2, 3, 5), (2, 1), mode="reflect"),
    "pad_replicate": lambda L, t: _F(L).pad(t(1, 2, 4, 4), (1, 2, 2, 1), mode="replicate"),
    "mse_loss": lambda L, t: _F(L).mse_loss(t(3, 4), t(3, 4)),
    "cosine_embedding_loss": lambda L, t: _F(L).cosine_embedding_loss(t(3, 4), t(3, 4), t.long([1, -1, 1])),
    "nll_loss": lambda L, t: _F(L).nll_loss(t(4, 3), t.long([0, 2, 1, 1])),
    "nll_loss2d": lambda L, t: _F(L).nll_loss(t(2, 3, 2, 2), t.long([[[0, 1], [2, 1]], [[1, 1], [0, 2]]])),
    "hinge_embedding_loss": lambda L, t: _F(L).hinge_embedding_loss(t(3, 4), t.long([[1, -1, 1, 1]] * 3)),
    "poisson_nll_loss": lambda L, t: _F(L).poisson_nll_loss(t(3, 4), t.pos(3, 4)),
    "cross_entropy": lambda L, t: _F(L).cross_entropy(t(4, 3), t.long([0, 2, 1, 1])),
    "l1_loss": lambda L, t: _F(L).l1_loss(t(3, 4), t(3, 4)),
    "smooth_l1_loss": lambda L, t: _F(L).smooth_l1_loss(t(3, 4), t(3, 4)),
    "huber_loss": lambda L, t: _F(L).huber_loss(t(3, 4), t(3, 4)),
    "margin_ranking_loss": lambda L, t: _F(L).margin_ranking_loss(t(5), t(5), t.long([1, -1, 1, 1, -1])),
    "soft_margin_loss": lambda L, t: _F(L).soft_margin_loss(t(3, 4), t.long([[1, -1, 1, 1]] * 3)),
    "triplet_margin_loss": lambda L, t: _F(L).triplet_margin_loss(t(3, 4), t(3, 4), t(3, 4)),
    "multi_margin_loss": lambda L, t: _F(L).multi_margin_loss(t(4, 3), t.long([0, 2, 1, 1])),
    "multilabel_margin_loss": lambda L, t: _F(L).multilabel_margin_loss(t(2, 4), t.long([[3, 0, -1, 1],
                                                                                          [1, 2, 3, -1]])),
    "ctc_loss": lambda L, t: _F(L).ctc_loss(t(6, 2, 4).log_softmax(2), t.long([[1, 2, 2], [1, 3, 0]]),
                                            t.long([6, 5]), t.long([3, 2])),
    "kl_div": lambda L, t: _F(L).kl_div(t(3, 4), t.prob(3, 4), reduction="batchmean"),
    "binary_cross_entropy_with_logits": lambda L, t: _F(L).binary_cross_entropy_with_logits(t(4, 3), t.prob(4, 3)),
    "fft_fft": lambda L, t: L.fft.fft(t(8)),
    "fft_ifft": lambda L, t: L.fft.ifft(t(8)),
    "fft_fft2": lambda L, t: L.fft.fft2(t(4, 4)),
    "fft_ifft2": lambda L, t: L.fft.ifft2(t(4, 4)),
    "fft_fftn": lambda L, t: L.fft.fftn(t(2, 4, 4)),
    "fft_ifftn": lambda L, t: L.fft.ifftn(t(2, 4, 4)),
    "fft_rfft": lambda L, t: L.fft.rfft(t(8)),
    "fft_irfft": lambda L, t: L.fft.irfft(t(5)),
    "fft_rfft2": lambda L, t: L.fft.rfft2(t(4, 4)),
    "fft_irfft2": lambda L, t: L.fft.irfft2(t(4, 3)),
    "fft_rfftn": lambda L, t: L.fft.rfftn(t(2, 4, 4)),
    "fft_irfftn": lambda L, t: L.fft.irfftn(t(2, 4, 3)),
    "fft_hfft": lambda L, t: L.fft.hfft(t(5)),
    "fft_ihfft": lambda L, t: L.fft.ihfft(t(8)),
    "linalg_cond": lambda L, t: L.linalg.cond(t.well(3, 3)),
    "linalg_matrix_rank": lambda L, t: L.linalg.matrix_rank(t(4, 3)),
    "linalg_solve": lambda L, t: L.linalg.solve(t.well(3, 3), t(3, 2)),
    "linalg_cholesky": lambda L, t: L.linalg.cholesky(t.spd(3)),
    "linalg_svdvals": lambda L, t: L.linalg.svdvals(t(4, 3)),
    "linalg_eigvals": lambda L, t: L.linalg.eigvals(t.spd(3)),
    "linalg_eigvalsh": lambda L, t: L.linalg.eigvalsh(t.spd(3)),
    "linalg_inv": lambda L, t: L.linalg.inv(t.well(3, 3)),
    "linalg_householder_product": lambda L, t: L.linalg.householder_product(*L.geqrf(t(4, 3))),
    "linalg_tensorinv": lambda L, t: L.linalg.tensorinv(t.well(4, 4).reshape(4, 2, 2), ind=1),
    "linalg_tensorsolve": lambda L, t: L.linalg.tensorsolve(t.well(4, 4).reshape(2, 2, 4), t(2, 2)),
    "geqrf": lambda L, t: L.geqrf(t(4, 3)),
    "lu": lambda L, t: t.well(3, 3).lu(),  # ember.lu is not exported yet: the method
    "qr": lambda L, t: L.qr(t(4, 3)),
    "svd": lambda L, t: L.svd(t(4, 3)),
    "triangular_solve": lambda L, t: L.triangular_solve(t(4, 2), _tri(L, t)),
    "linalg_qr": lambda L, t: L.linalg.qr(t(4, 3)),
    "linalg_cholesky_ex": lambda L, t: L.linalg.cholesky_ex(t.spd(3)),
    "linalg_svd": lambda L, t: L.linalg.svd(t(4, 3)),
    "linalg_eig": lambda L, t: L.linalg.eig(t.spd(3)),
    "linalg_eigh": lambda L, t: L.linalg.eigh(t.spd(3)),
    "linalg_lstsq": lambda L, t: L.linalg.lstsq(t.well(4, 4)[:, :3], t(4, 2)),
    "linalg_inv_ex": lambda L, t: L.linalg.inv_ex(t.well(3, 3)),
    # promote to the widest
    "cat": lambda L, t: L.cat([t(3), t.bf16(2)]),
    "stack": lambda L, t: L.stack([t(3), t.f32(3)]),
    "index_copy": lambda L, t: L.index_copy(t(4, 3), 0, t.long([0, 2]), t.bf16(2, 3)),
}
