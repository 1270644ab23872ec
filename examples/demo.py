"""A short tour of ember's tensors: creation, arithmetic, broadcasting, matmul, indexing, reductions.

Run it with `python examples/demo.py` once ember is installed (see the README). It will become a
training demo when ember-autograd and ember-nn land.
"""
import ember

# creation
a = ember.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
b = ember.arange(3, dtype=ember.float32)
i = ember.eye(3)
print("a =", a)
print("a.shape =", a.shape, " a.dtype =", a.dtype, " a.device =", a.device)
print("zeros:", ember.zeros(2, 2), sep="\n")

# arithmetic and type promotion (int32 tensor + Python float -> float32, as in PyTorch)
print("a * 2 + 1 =", a * 2 + 1, sep="\n")
print("int32 + 2.5 ->", (ember.tensor([1, 2], dtype=ember.int32) + 2.5).dtype)

# broadcasting: (2, 3) + (3,) and (2, 1) * (1, 3)
print("a + b =", a + b, sep="\n")
print("outer product by broadcasting:", ember.tensor([[1.0], [2.0]]) * b.unsqueeze(0), sep="\n")

# matrix product
print("a @ i == a:", ember.equal(a @ i, a))
print("a @ a.T =", a @ a.t(), sep="\n")

# indexing, slicing and in-place updates
print("a[1] =", a[1], " a[:, 0] =", a[:, 0], " a[a > 3] =", a[a > 3])
c = a.clone()
c[0, :] = 0
c.add_(10)
print("c =", c, sep="\n")

# reductions
print("sum:", a.sum().item(), " mean over rows:", a.mean(dim=0), " row sums:", a.sum(1))
x = ember.linspace(0, 1, 5)
print("linspace mean:", x.mean().item(), " variance:", ((x - x.mean()) ** 2).mean().item())
