# Can Halide 21 put two pipeline outputs of different dimensionality in one GPU kernel with compute_with?
import halide as hl
E, J, K, B = 16, 10, 8, 128
g = hl.ImageParam(hl.Float(32), 4, "g")   # (e, j, i, b)
W = hl.ImageParam(hl.Float(32), 4, "W")   # (k, e, j, i)
u = hl.ImageParam(hl.Float(32), 3, "u")   # (k, i, b)
k, e, j, i, b = hl.Var("k"), hl.Var("e"), hl.Var("j"), hl.Var("i"), hl.Var("b")
r_ej = hl.RDom([(0, E), (0, J)])
rb = hl.RDom([(0, B)])
grad_u = hl.Func("grad_u")
grad_u[k, i, b] = 0.0
grad_u[k, i, b] += g[r_ej.x, r_ej.y, i, b] * W[k, r_ej.x, r_ej.y, i]
grad_W = hl.Func("grad_W")
grad_W[k, e, j, i] = 0.0
grad_W[k, e, j, i] += g[e, j, i, rb] * u[k, i, rb]
# Schedule: a block per input capsule i for both outputs, threads inside.
grad_u.reorder(k, b, i).gpu_blocks(i).gpu_threads(k, b)
grad_u.update().reorder(k, b, i).gpu_blocks(i).gpu_threads(k, b)
ej = hl.Var("ej")
grad_W.fuse(e, j, ej).reorder(k, ej, i).gpu_blocks(i).gpu_threads(k, ej)
grad_W.update().fuse(e, j, ej).reorder(k, ej, i).gpu_blocks(i).gpu_threads(k, ej)
import sys
mode = sys.argv[1]  # "with" or "without" compute_with
if mode == "with":
    grad_W.compute_with(grad_u, i)
    grad_W.update().compute_with(grad_u.update(), i)
p = hl.Pipeline([grad_u, grad_W])
t = hl.Target("x86-64-linux-cuda-cuda_capability_80")
import os; os.makedirs("/tmp/exp", exist_ok=True)
p.compile_to_lowered_stmt("/tmp/exp/cw_%s.stmt" % mode, [g, W, u], hl.StmtOutputFormat.Text, t)
print("ok", mode)
