#!/usr/bin/env python3
"""grad_cli.py - gradients through the command line, checked against NumPy.

Each case is a .tg program whose function returns a scalar loss and its gradients
(`grad(loss, ...)`), and the same loss written with NumPy. The script runs `tgraph run`
(in each --mode) with random inputs, then compares every gradient with central finite
differences of the NumPy loss in float64, and the loss itself with NumPy's value.
The vjp form is checked the same way (the loss is the sum of each output times its
cotangent), and the jacobian and hessian forms against central differences of the NumPy
value or cost (DERIV_CASES). The classic cases are included: d/dz sum(z^2) = 2z, the
gradient of x(?,?) + b(1,?) with respect to b summed over axis 0 keeping shape (1,n), dot's
(g.Y^T, X^T.g), a small MLP with softmax cross-entropy, a call of another function of
the file, vectorize (per-example gradients differentiated again), the cumulative ops,
sorts, topk and order statistics together, the composites (relu, square, log_sigmoid,
logit, swapaxes, moveaxis, einsum), advanced indexing (index arrays, integers, slices and
masks mixed, read and written), the LAPACK
ops (cholesky, solve, solve_triangular, cho_solve, inv, det, slogdet, eigh) on matrices the
program makes well conditioned, and diag (a batched log-density, non-square blocks).

On devices: --devices N runs on N virtual host devices (`tgraph run --devices N`), --sim K
with K sim devices (TGRAPH_SIM_DEVICES=K, memory protected), and --annotate adds
`device="..."` to the outermost call of a random half of each program's lines, the grad,
vjp, jacobian and hessian forms included, naming cpu or a device of the run (fixed per
case; tg_devices.py).

usage: grad_cli.py --tgraph PATH [--mode reference,vm] [--devices N] [--sim K] [--annotate]
Ends with the line "N passed, N failed"; exits 1 when a case failed.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

import tg_devices

RNG = np.random.default_rng(20261202)
DEV = {"host": 0, "sim": 0, "annotate": False}  # --devices, --sim, --annotate


def log_softmax(h, axis):
    m = h.max(axis=axis, keepdims=True)
    return h - m - np.log(np.exp(h - m).sum(axis=axis, keepdims=True))


CASES = [
    ("sum_of_squares", """
func main(z: f64[5]) {
  loss = sum(mul(z, z))
  gz = grad(loss, z)
  return loss, gz
}""", {"z": (5,)}, lambda v: np.sum(v["z"] ** 2), ["z"]),
    ("row_bias", """
func main(x: f64[?,?], b: f64[1,?]) {
  loss = sum(tanh(add(x, b)))
  gx, gb = grad(loss, x, b)
  return loss, gx, gb
}""", {"x": (4, 3), "b": (1, 3)}, lambda v: np.sum(np.tanh(v["x"] + v["b"])), ["x", "b"]),
    ("dot", """
func main(X: f64[3,4], Y: f64[4,2], G: f64[3,2]) {
  loss = sum(mul(dot(X, Y), G))
  gX, gY = grad(loss, X, Y)
  return loss, gX, gY
}""", {"X": (3, 4), "Y": (4, 2), "G": (3, 2)},
     lambda v: np.sum((v["X"] @ v["Y"]) * v["G"]), ["X", "Y"]),
    ("mlp_cross_entropy", """
func main(x: f64[?,5], W1: f64[5,4], b1: f64[4], W2: f64[4,3], y: i64[?]) {
  h = tanh(add(dot(x, W1), b1))
  lp = log_softmax(dot(h, W2), axis=1)
  loss = mean(neg(take_along(lp, expand_dims(y, axis=1), axis=1)))
  gW1, gb1, gW2 = grad(loss, W1, b1, W2)
  return loss, gW1, gb1, gW2
}""", {"x": (6, 5), "W1": (5, 4), "b1": (4,), "W2": (4, 3), "y": ("int", 6, 3)},
     lambda v: -np.mean(np.take_along_axis(
         log_softmax(np.tanh(v["x"] @ v["W1"] + v["b1"]) @ v["W2"], 1),
         v["y"][:, None], axis=1)), ["W1", "b1", "W2"]),
    ("slices_and_reductions", """
func main(x: f64[4,6]) {
  a = x[::-1, 1::2]
  loss = add(sum(mul(a, a)), max(exp(x[1:3])))
  gx = grad(loss, x)
  return loss, gx
}""", {"x": (4, 6)}, lambda v: np.sum(v["x"][::-1, 1::2] ** 2) + np.max(np.exp(v["x"][1:3])),
     ["x"]),
    ("vjp_two_outputs", """
func main(X: f64[3,4], W: f64[4,2], C: f64[3,2], D: f64[4]) {
  y = tanh(dot(X, W))
  z = exp(sum(X, axis=0))
  loss = add(sum(mul(y, C)), sum(mul(z, D)))
  gX, gW = vjp(y, z, C, D, X, W, n_outputs=2)
  return loss, gX, gW
}""", {"X": (3, 4), "W": (4, 2), "C": (3, 2), "D": (4,)},
     lambda v: np.sum(np.tanh(v["X"] @ v["W"]) * v["C"]) + np.sum(np.exp(v["X"].sum(0)) * v["D"]),
     ["X", "W"]),
    ("function_call", """
func layer(x: f64[?,4], W: f64[4,3]) {
  return tanh(dot(x, W))
}

func main(x: f64[?,4], W: f64[4,3], b: f64[3]) {
  h = layer(x, W)
  loss = sum(mul(add(h, b), h))
  gW, gb = grad(loss, W, b)
  return loss, gW, gb
}""", {"x": (5, 4), "W": (4, 3), "b": (3,)},
     lambda v: np.sum((np.tanh(v["x"] @ v["W"]) + v["b"]) * np.tanh(v["x"] @ v["W"])),
     ["W", "b"]),
    # vectorize (docs/vectorize.md): the gradient through a vectorized function, mapped
    # along axis 0 and along axis 1 with an input shared by every example
    ("vectorize", """
func f(x: f64[4], W: f64[4,3]) {
  return logsumexp(tanh(dot(x, W)))
}

func main(X: f64[5,4], W: f64[4,3]) {
  v = vectorize(@f, X, W, in_axes=[0, none])
  u = vectorize(@f, transpose(X), W, in_axes=[1, none])
  loss = add(sum(mul(v, v)), sum(mul(u, 0.5)))
  gX, gW = grad(loss, X, W)
  return loss, gX, gW
}""", {"X": (5, 4), "W": (4, 3)},
     lambda v: (lambda e: np.sum(e ** 2) + 0.5 * np.sum(e))(
         np.array([np.log(np.sum(np.exp(np.tanh(x @ v["W"])))) for x in v["X"]])),
     ["X", "W"]),
    # per-example gradients (a gradient inside the vectorized function), differentiated
    # again: loss = sum_i <G_i, d l_i / d w> with l_i the logistic loss of example i
    ("vectorize_per_example_grad", """
func lossgrad(x: f64[3], y: f64[], w: f64[3]) {
  z = dot(x, w)
  l = sub(softplus(z), mul(y, z))
  return grad(l, w)
}

func main(X: f64[6,3], y: f64[6], w: f64[3], G: f64[6,3]) {
  pe = vectorize(@lossgrad, X, y, w, in_axes=[0, 0, none])
  loss = sum(mul(pe, G))
  gX, gw, gG = grad(loss, X, w, G)
  return loss, gX, gw, gG
}""", {"X": (6, 3), "y": (6,), "w": (3,), "G": (6, 3)},
     lambda v: np.sum(np.array([(1 / (1 + np.exp(-(x @ v["w"]))) - y) * x
                                for x, y in zip(v["X"], v["y"])]) * v["G"]),
     ["X", "w", "G"]),
    # the LAPACK ops (docs/grad.md, "Linear algebra (lapack.c)"), on matrices made well
    # conditioned in the graph: X X^T + n I is positive definite, X + n I far from singular,
    # and a small symmetric matrix plus diag(0, 1.5, 3, 4.5) has well separated eigenvalues
    ("cholesky", """
func main(X: f64[4,4], G: f64[4,4]) {
  A = add(dot(X, transpose(X)), mul(4, eye(n=4)))
  L = cholesky(A)
  U = cholesky(A, lower=false)
  loss = add(sum(mul(L, G)), sum(mul(U, mul(G, G))))
  gX, gG = grad(loss, X, G)
  return loss, gX, gG
}""", {"X": (4, 4), "G": (4, 4)},
     lambda v: (np.sum(np.linalg.cholesky(v["X"] @ v["X"].T + 4 * np.eye(4)) * v["G"])
                + np.sum(np.linalg.cholesky(v["X"] @ v["X"].T + 4 * np.eye(4)).T
                         * v["G"] ** 2)), ["X", "G"]),
    ("solvers", """
func main(X: f64[3,3], b: f64[3], B: f64[3,2]) {
  A = add(X, mul(3, eye(n=3)))
  x = solve(A, b)
  y = solve_triangular(A, B, lower=true, trans=1)
  z = solve_triangular(A, b, unit_diagonal=true)
  loss = add(add(sum(mul(x, x)), sum(mul(y, B))), sum(mul(z, b)))
  gX, gb, gB = grad(loss, X, b, B)
  return loss, gX, gb, gB
}""", {"X": (3, 3), "b": (3,), "B": (3, 2)},
     lambda v: (np.sum(np.linalg.solve(v["X"] + 3 * np.eye(3), v["b"]) ** 2)
                + np.sum(np.linalg.solve(np.tril(v["X"] + 3 * np.eye(3)).T, v["B"]) * v["B"])
                + np.sum(np.linalg.solve(np.triu(v["X"], 1) + np.eye(3), v["b"]) * v["b"])),
     ["X", "b", "B"]),
    ("cho_solve_inv_det", """
func main(X: f64[3,3], b: f64[3]) {
  S = add(dot(X, transpose(X)), mul(3, eye(n=3)))
  z = cho_solve(cholesky(S), b)
  A = add(X, mul(3, eye(n=3)))
  s, l = slogdet(A)
  loss = add(add(sum(mul(z, b)), sum(inv(S))), add(mul(s, l), det(A)))
  gX, gb = grad(loss, X, b)
  return loss, gX, gb
}""", {"X": (3, 3), "b": (3,)},
     lambda v: (np.sum(np.linalg.solve(v["X"] @ v["X"].T + 3 * np.eye(3), v["b"]) * v["b"])
                + np.sum(np.linalg.inv(v["X"] @ v["X"].T + 3 * np.eye(3)))
                + np.prod(np.linalg.slogdet(v["X"] + 3 * np.eye(3)))
                + np.linalg.det(v["X"] + 3 * np.eye(3))), ["X", "b"]),
    ("eigh", """
func main(X: f64[4,4], C: f64[4,4]) {
  D = const(value=[0.0, 1.5, 3.0, 4.5], dtype="f64")
  A = add(mul(0.1, add(X, transpose(X))), mul(eye(n=4), D))
  w, v = eigh(A)
  w2, v2 = eigh(A, lower=false)
  loss = add(add(sum(mul(w, D)), sum(mul(mul(v, v), C))), sum(mul(w2, w2)))
  gX = grad(loss, X)
  return loss, gX
}""", {"X": (4, 4), "C": (4, 4)},
     lambda v: (lambda w, vv: np.sum(w * np.array([0.0, 1.5, 3, 4.5])) + np.sum(vv * vv * v["C"])
                + np.sum(w ** 2))(*np.linalg.eigh(0.1 * (v["X"] + v["X"].T)
                                                  + np.diag([0.0, 1.5, 3, 4.5]))), ["X"]),
    # the same ops over batches (Blockwise): batch dimensions broadcast (a missing one, a
    # static 1), so the gradients of the broadcast operands sum over them
    ("batched_cholesky_logdet", """
func main(X: f64[2,3,4,4], G: f64[3,4,4], b: f64[4], B: f64[1,3,4,2]) {
  A = add(matmul(X, transpose(X, axes=[0, 1, 3, 2])), mul(4, eye(n=4)))
  L = cholesky(A)
  I = eye(n=4)
  ld = sum(log(add(mul(L, I), sub(1.0, I))), axis=[2, 3])
  x = cho_solve(L, b)
  y = solve(add(G, mul(4, eye(n=4))), B)
  z = solve_triangular(L, B, lower=true, trans=1)
  loss = add(add(sum(mul(ld, ld)), sum(mul(x, x))), add(sum(mul(y, y)), sum(z)))
  gX, gG, gb, gB = grad(loss, X, G, b, B)
  return loss, gX, gG, gb, gB
}""", {"X": (2, 3, 4, 4), "G": (3, 4, 4), "b": (4,), "B": (1, 3, 4, 2)},
     lambda v: (lambda A, Gp: (
         np.sum(np.log(np.diagonal(np.linalg.cholesky(A), axis1=-2, axis2=-1)).sum(-1) ** 2)
         + sum(np.sum(np.linalg.solve(A[i, j], v["b"]) ** 2)
               for i in range(2) for j in range(3))
         + np.sum(np.linalg.solve(Gp, v["B"]) ** 2)
         + sum(np.sum(np.linalg.solve(np.linalg.cholesky(A[i, j]).T, v["B"][0, j]))
               for i in range(2) for j in range(3))))(
        v["X"] @ np.swapaxes(v["X"], -1, -2) + 4 * np.eye(4), v["G"] + 4 * np.eye(4)),
     ["X", "G", "b", "B"]),
    ("batched_inv_det_eigh", """
func main(X: f64[3,3,3], Y: f64[1,3,3]) {
  A = add(X, mul(3, eye(n=3)))
  s, l = slogdet(A)
  D = const(value=[0.0, 1.5, 3.0], dtype="f64")
  S = add(mul(0.1, add(Y, transpose(Y, axes=[0, 2, 1]))), mul(eye(n=3), D))
  w, v = eigh(add(S, mul(0.01, A)))
  loss = add(add(sum(mul(s, l)), sum(det(A))), add(sum(inv(A)), sum(mul(w, w))))
  gX, gY = grad(loss, X, Y)
  return loss, gX, gY
}""", {"X": (3, 3, 3), "Y": (1, 3, 3)},
     lambda v: (lambda A, S: np.sum(np.prod(np.linalg.slogdet(A), axis=0)) + np.sum(np.linalg.det(A))
                + np.sum(np.linalg.inv(A)) + np.sum(np.linalg.eigh(S + 0.01 * A)[0] ** 2))(
        v["X"] + 3 * np.eye(3),
        0.1 * (v["Y"] + np.swapaxes(v["Y"], -1, -2)) + np.eye(3) * np.array([0.0, 1.5, 3.0])),
     ["X", "Y"]),
    ("cumulative_and_sorting", """
func main(x: f64[4,6], w: f64[4,6]) {
  a = sum(mul(cumsum(x, axis=1), w))
  b = sum(mul(cumprod(x), reshape(w, shape=[-1])))
  c = sum(mul(cummax(x, axis=0), w))
  d = sum(mul(diff(x, n=2, axis=1), w[:, 2:]))
  e = sum(mul(sort(x, axis=none), reshape(w, shape=[-1])))
  v, i = topk(x, k=3, axis=1)
  f = sum(mul(v, w[:, :3]))
  q = sum(mul(quantile(x, q=[0.3, 0.8], axis=1), w[:2, :4]))
  loss = add(add(add(a, b), add(c, d)), add(add(e, f), add(q, median(x))))
  gx, gw = grad(loss, x, w)
  return loss, gx, gw
}""", {"x": (4, 6), "w": (4, 6)},
     lambda v: (np.sum(np.cumsum(v["x"], axis=1) * v["w"]) + np.sum(np.cumprod(v["x"]) * v["w"].ravel())
                + np.sum(np.maximum.accumulate(v["x"], axis=0) * v["w"])
                + np.sum(np.diff(v["x"], n=2, axis=1) * v["w"][:, 2:])
                + np.sum(np.sort(v["x"], axis=None) * v["w"].ravel())
                + np.sum(-np.sort(-v["x"], axis=1)[:, :3] * v["w"][:, :3])
                + np.sum(np.quantile(v["x"], [0.3, 0.8], axis=1) * v["w"][:2, :4])
                + np.median(v["x"])),
     ["x", "w"]),
    # backpropagation through time: an RNN cell with a per-step output, and a GARCH(1,1)
    # log-likelihood whose running sum is a carried state
    ("scan_rnn", """
func cell(h: f64[3], x: f64[2], W: f64[3,3], U: f64[3,2]) {
  hn = tanh(add(dot(W, h), dot(U, x)))
  return hn, sum(mul(hn, hn))
}
func main(h0: f64[3], xs: f64[6,2], W: f64[3,3], U: f64[3,2]) {
  hl, ys = scan(@cell, h0, xs, W, U, n_sequences=1)
  loss = add(sum(ys), sum(hl))
  gh0, gxs, gW, gU = grad(loss, h0, xs, W, U)
  return loss, gh0, gxs, gW, gU
}""", {"h0": (3,), "xs": (6, 2), "W": (3, 3), "U": (3, 2)},
     lambda v: rnn_loss(v), ["h0", "xs", "W", "U"]),
    ("scan_garch", """
func garch(s2: f64[], ll: f64[], r: f64[], w: f64[], a: f64[], b: f64[]) {
  s2n = add(add(w, mul(a, mul(r, r))), mul(b, s2))
  lln = sub(ll, mul(0.5, add(log(s2n), div(mul(r, r), s2n))))
  return s2n, lln
}
func main(r: f64[8], p: f64[3]) {
  w = add(0.1, mul(0.01, p[0]))
  a = add(0.1, mul(0.01, p[1]))
  b = add(0.7, mul(0.01, p[2]))
  s2l, loss = scan(@garch, 1.0, 0.0, r, w, a, b, n_states=2, n_sequences=1)
  gr, gp = grad(loss, r, p)
  return loss, gr, gp
}""", {"r": (8,), "p": (3,)}, lambda v: garch_ll(v), ["r", "p"]),
    ("conveniences", """
func main(x: f64[3,4], w: f64[4,3]) {
  a = sum(mul(relu(x), swapaxes(w, axis1=0, axis2=1)))
  b = sum(mul(square(x), moveaxis(w, source=0, destination=1)))
  c = sum(mul(log_sigmoid(x), transpose(w)))
  d = sum(logit(sigmoid(mul(x, 0.5))))
  loss = add(add(a, b), add(c, d))
  gx, gw = grad(loss, x, w)
  return loss, gx, gw
}""", {"x": (3, 4), "w": (4, 3)},
     lambda v: (np.sum(np.maximum(v["x"], 0) * v["w"].T) + np.sum(v["x"] ** 2 * v["w"].T)
                + np.sum(-np.logaddexp(0, -v["x"]) * v["w"].T) + np.sum(v["x"] * 0.5)),
     ["x", "w"]),
    ("advanced_indexing", """
func main(x: f64[4,3,5], y: f64[2,3]) {
  r = const(value=[0, 3, -1], dtype="i64")
  c = const(value=[1, 2], dtype="i32", shape=[2, 1])
  d = const(value=[4, 0, 4], dtype="i64")
  m = gt(x[:, 0, 0], 0.0)
  a = sum(square(x[r, c]))
  b = sum(mul(x[r, :, d], x[r, :, d]))
  e = sum(exp(x[1:, c, 2]))
  f = sum(square(x[m]))
  s = set_subtensor(x[r, 1, d], y[0])
  t = inc_subtensor(x[r, c, 0], y)
  u = inc_subtensor(x[r, c, d], y)
  loss = add(add(add(a, b), add(e, f)), add(sum(square(s)), add(sum(square(t)), sum(square(u)))))
  gx, gy = grad(loss, x, y)
  return loss, gx, gy
}""", {"x": (4, 3, 5), "y": (2, 3)},
     lambda v: (lambda x, y, r, c, d: (
         np.sum(x[r, c] ** 2) + np.sum(x[r, :, d] ** 2) + np.sum(np.exp(x[1:, c, 2]))
         + np.sum(x[x[:, 0, 0] > 0] ** 2)
         + np.sum((lambda s: (s.__setitem__((r, 1, d), y[0]), s)[1])(x.copy()) ** 2)
         + np.sum((lambda t: (np.add.at(t, (r, c, 0), y), t)[1])(x.copy()) ** 2)
         + np.sum((lambda t: (np.add.at(t, (r, c, d), y), t)[1])(x.copy()) ** 2)))(
         v["x"], v["y"], np.array([0, 3, -1]), np.array([[1], [2]]), np.array([4, 0, 4])),
     ["x", "y"]),
    ("einsum", """
func main(A: f64[2,3,4], B: f64[2,4,5], M: f64[3,4], Q: f64[4,4], v: f64[4]) {
  a = sum(mul(einsum(A, B, subscripts="bij,bjk->bik"), einsum(A, B, subscripts="bij,bjk->bik")))
  b = einsum(M, Q, v, subscripts="ij,jk,k->")
  c = einsum(Q, subscripts="ii")
  d = sum(einsum(A, M, subscripts="...ij,ij->...i"))
  e = sum(square(einsum(M, v, subscripts="ij,j->i")))
  loss = add(add(a, b), add(add(c, d), e))
  gA, gB, gM, gQ, gv = grad(loss, A, B, M, Q, v)
  return loss, gA, gB, gM, gQ, gv
}""", {"A": (2, 3, 4), "B": (2, 4, 5), "M": (3, 4), "Q": (4, 4), "v": (4,)},
     lambda v: (np.sum(np.einsum("bij,bjk->bik", v["A"], v["B"]) ** 2)
                + np.einsum("ij,jk,k->", v["M"], v["Q"], v["v"]) + np.trace(v["Q"])
                + np.sum(np.einsum("...ij,ij->...i", v["A"], v["M"]))
                + np.sum((v["M"] @ v["v"]) ** 2)),
     ["A", "B", "M", "Q", "v"]),
    # diag: a batched Gaussian log-density with sum(log(diag(L))) (fused block by block
    # after the gradient is built), and diagonals of non-square blocks with '?' extents
    ("diag_logdensity", """
func main(X: f64[3,4,4], x: f64[3,4,1], W: f64[?,3,5], V: f64[2,?,2]) {
  A = add(matmul(X, transpose(X, axes=[0, 2, 1])), mul(4, eye(n=4)))
  L = cholesky(A)
  z = solve_triangular(L, x, lower=true)
  lp = sub(mul(-0.5, sum(mul(z, z), axis=[1, 2])), sum(log(diag(L)), axis=-1))
  loss = add(sum(mul(lp, lp)), add(sum(mul(diag(W), diag(W))), sum(exp(diag(V)))))
  gX, gx, gW, gV = grad(loss, X, x, W, V)
  return loss, gX, gx, gW, gV
}""", {"X": (3, 4, 4), "x": (3, 4, 1), "W": (2, 3, 5), "V": (2, 6, 2)},
     lambda v: (lambda L: np.sum((-0.5 * np.sum(np.linalg.solve(L, v["x"]) ** 2, axis=(1, 2))
                                  - np.sum(np.log(np.diagonal(L, axis1=1, axis2=2)), axis=-1))
                                 ** 2)
                + np.sum(np.diagonal(v["W"], axis1=1, axis2=2) ** 2)
                + np.sum(np.exp(np.diagonal(v["V"], axis1=1, axis2=2))))(
        np.linalg.cholesky(v["X"] @ np.swapaxes(v["X"], 1, 2) + 4 * np.eye(4))),
     ["X", "x", "W", "V"]),
]


def rnn_loss(v):
    h, total = v["h0"], 0.0
    for x in v["xs"]:
        h = np.tanh(v["W"] @ h + v["U"] @ x)
        total += np.sum(h * h)
    return total + np.sum(h)


def garch_ll(v):
    w, a, b = 0.1 + 0.01 * v["p"][0], 0.1 + 0.01 * v["p"][1], 0.7 + 0.01 * v["p"][2]
    s2, ll = 1.0, 0.0
    for r in v["r"]:
        s2 = w + a * r * r + b * s2
        ll -= 0.5 * (np.log(s2) + r * r / s2)
    return ll


def _special_loss(v):
    import scipy.special as sp
    x, w = v["x"], v["w"]
    a, b, u = np.exp(0.5 * x) + 0.5, np.exp(0.5 * w) + 0.5, 1 / (1 + np.exp(-x))
    terms = [sp.gammaln(a) * w, sp.psi(a) * w, sp.polygamma(2, a) * w, sp.betaln(a, b) * w,
             sp.xlogy(x, a) * w, sp.xlog1py(w, u) * x, np.log(-np.expm1(-a)) * w,
             np.logaddexp(x, w) * w, sp.erfcx(x) * w, sp.log_ndtr(3 * x) * w,
             sp.erfinv(1.8 * u - 0.9) * w, sp.gammainc(2.5, a) * w, sp.gammaincc(1.5, b) * x]
    return sum(np.sum(t) for t in terms)


try:
    import scipy.special  # noqa: F401  (the special functions' case needs its oracle)
    CASES.append(
        ("special_functions", """
func main(x: f64[3,4], w: f64[3,4]) {
  a = add(exp(mul(x, 0.5)), 0.5)
  b = add(exp(mul(w, 0.5)), 0.5)
  u = sigmoid(x)
  l1 = add(sum(mul(gammaln(a), w)), sum(mul(digamma(a), w)))
  l2 = add(sum(mul(polygamma(2, a), w)), sum(mul(betaln(a, b), w)))
  l3 = add(sum(mul(xlogy(x, a), w)), sum(mul(xlog1py(w, u), x)))
  l4 = add(sum(mul(log1mexp(neg(a)), w)), sum(mul(logaddexp(x, w), w)))
  l5 = add(sum(mul(erfcx(x), w)), sum(mul(log_ndtr(mul(x, 3)), w)))
  l6 = add(sum(mul(erfinv(sub(mul(u, 1.8), 0.9)), w)), sum(mul(gammainc(2.5, a), w)))
  l7 = sum(mul(gammaincc(1.5, b), x))
  loss = add(add(add(l1, l2), add(l3, l4)), add(add(l5, l6), l7))
  gx, gw = grad(loss, x, w)
  return loss, gx, gw
}""", {"x": (3, 4), "w": (3, 4)}, _special_loss, ["x", "w"]))
except ImportError:
    print("note: scipy not found (Debian: python3-scipy): the special functions' case is "
          "skipped")

# jacobian and hessian forms: (name, program, input shapes, NumPy function, wrt, kind); the
# program returns J<w> (kind "jacobian", the NumPy function gives the value) or H<w> (kind
# "hessian", the NumPy function gives the 0-d cost) for each w.
DERIV_CASES = [
    ("jacobian_rank2", """
func main(x: f64[3], W: f64[2,3]) {
  y = mul(expand_dims(tanh(dot(W, x)), axis=1), softmax(x, axis=0))
  Jx, JW = jacobian(y, x, W)
  return Jx, JW
}""", {"x": (3,), "W": (2, 3)},
     lambda v: np.tanh(v["W"] @ v["x"])[:, None] * (np.exp(v["x"]) / np.exp(v["x"]).sum()),
     ["x", "W"], "jacobian"),
    ("hessian_two_vars", """
func main(x: f64[2,2], w: f64[3]) {
  c = add(logsumexp(x), mul(sum(mul(w, mul(w, w))), sum(exp(x))))
  Hx, Hw = hessian(c, x, w)
  return Hx, Hw
}""", {"x": (2, 2), "w": (3,)},
     lambda v: (np.log(np.exp(v["x"]).sum()) + np.sum(v["w"] ** 3) * np.exp(v["x"]).sum()),
     ["x", "w"], "hessian"),
]


def numeric_jacobian(f, vals, name, eps=1e-6):
    x = vals[name]
    y0 = np.asarray(f(vals))
    j = np.zeros(y0.shape + x.shape)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps
        fp = np.asarray(f(vals))
        x[i] = old - eps
        fm = np.asarray(f(vals))
        x[i] = old
        j[(Ellipsis,) + i] = (fp - fm) / (2 * eps)
    return j


def numeric_hessian(f, vals, name, eps=1e-4):
    x = vals[name]
    h = np.zeros(x.shape + x.shape)
    for i in np.ndindex(x.shape):
        for j in np.ndindex(x.shape):
            acc = 0.0
            for si, sj, w in ((1, 1, 1), (1, -1, -1), (-1, 1, -1), (-1, -1, 1)):
                oi, oj = x[i], x[j]
                x[i] = oi + si * eps
                x[j] = x[j] + sj * eps
                acc += w * f(vals)
                x[j] = oj
                x[i] = oi
            h[i + j] = acc / (4 * eps * eps)
    return h


def numeric_grad(f, vals, name, eps=1e-6):
    x = vals[name]
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps
        fp = f(vals)
        x[i] = old - eps
        fm = f(vals)
        x[i] = old
        g[i] = (fp - fm) / (2 * eps)
    return g


def mode_args(mode):
    """`tgraph run` options of a mode name: a --mode value, or debug-c (debug mode checking
    the c backend)."""
    if mode == "debug-c":
        return ["--mode", "debug", "--debug-backend", "c"]
    return ["--mode", mode]


def program(name, src):
    """The text of a case's program, annotated when --annotate says."""
    lines = src.strip().split("\n")
    if DEV["annotate"]:
        lines = tg_devices.annotate_lines(lines, "grad_cli/" + name,
                                          tg_devices.names(DEV["host"], DEV["sim"]))
    return "\n".join(lines) + "\n"


def run_tgraph(args):
    """The finished `tgraph` process of args, or None when it ran past 120 s."""
    try:
        return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                              env=tg_devices.env(DEV["sim"]))
    except subprocess.TimeoutExpired:
        return None


def run_case(tgraph, mode, case, work):
    name, src, shapes, f, wrt = case
    path = os.path.join(work, name + ".tg")
    with open(path, "w") as fh:
        fh.write(program(name, src))
    vals, args = {}, [tgraph, "run", path] + mode_args(mode) + tg_devices.run_args(DEV["host"])
    for k, s in shapes.items():
        vals[k] = (RNG.integers(0, s[2], size=s[1]).astype(np.int64) if s[0] == "int"
                   else RNG.standard_normal(s))
        np.save(os.path.join(work, k + ".npy"), vals[k])
        args += ["--in", f"{k}={os.path.join(work, k + '.npy')}"]
    outs = ["loss"] + ["g" + w for w in wrt]
    for o in outs:
        args += ["--out", f"{o}={os.path.join(work, o + '.npy')}"]
    res = run_tgraph(args)
    if res is None:
        return "tgraph timed out after 120 s"
    if res.returncode != 0:
        return f"tgraph failed: {res.stderr.decode().strip()}"
    loss = np.load(os.path.join(work, "loss.npy"))
    if not np.allclose(loss, f(vals), rtol=1e-12, atol=1e-12):
        return f"loss {loss} != NumPy {f(vals)}"
    for w in wrt:
        got = np.load(os.path.join(work, "g" + w + ".npy"))
        if got.shape != vals[w].shape or got.dtype != vals[w].dtype:
            return f"grad {w}: shape/dtype {got.shape}/{got.dtype}, want {vals[w].shape}/{vals[w].dtype}"
        want = numeric_grad(f, vals, w)
        err = np.max(np.abs(got - want)) if got.size else 0.0
        if not np.allclose(got, want, rtol=1e-6, atol=1e-7):
            return f"grad {w}: max abs error {err:.3g}\n got {got}\n finite differences {want}"
    return None


def run_deriv_case(tgraph, mode, case, work):
    name, src, shapes, f, wrt, kind = case
    path = os.path.join(work, name + ".tg")
    with open(path, "w") as fh:
        fh.write(program(name, src))
    vals, args = {}, [tgraph, "run", path] + mode_args(mode) + tg_devices.run_args(DEV["host"])
    for k, s in shapes.items():
        vals[k] = RNG.standard_normal(s) * 0.5
        np.save(os.path.join(work, k + ".npy"), vals[k])
        args += ["--in", f"{k}={os.path.join(work, k + '.npy')}"]
    prefix = "J" if kind == "jacobian" else "H"
    for w in wrt:
        args += ["--out", f"{prefix}{w}={os.path.join(work, prefix + w + '.npy')}"]
    res = run_tgraph(args)
    if res is None:
        return "tgraph timed out after 120 s"
    if res.returncode != 0:
        return f"tgraph failed: {res.stderr.decode().strip()}"
    for w in wrt:
        got = np.load(os.path.join(work, prefix + w + ".npy"))
        if kind == "jacobian":
            want, tol = numeric_jacobian(f, vals, w), 1e-7
        else:
            want, tol = numeric_hessian(f, vals, w), 1e-5
        if got.shape != want.shape:
            return f"{prefix}{w}: shape {got.shape}, want {want.shape}"
        if not np.allclose(got, want, rtol=tol, atol=tol):
            err = np.max(np.abs(got - want))
            return f"{prefix}{w}: max abs error {err:.3g}\n got {got}\n finite differences {want}"
    return None


def describe(case, mode):
    """The program of a failed case as it ran, and the command line that ran it."""
    cmd = " ".join(tg_devices.env_words(DEV["sim"]) + ["tgraph", "run"] + mode_args(mode)
                   + tg_devices.run_args(DEV["host"]))
    return "  run as: %s\n  program:\n%s" % (
        cmd, "".join("    " + ln + "\n" for ln in program(case[0], case[1]).split("\n") if ln))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tgraph", required=True)
    ap.add_argument("--mode", default="reference,vm")
    ap.add_argument("--devices", type=int, default=0, metavar="N",
                    help="run on N virtual host devices cpu:0..N-1 (tgraph run --devices N)")
    ap.add_argument("--sim", type=int, default=0, metavar="K",
                    help="with K sim devices sim:0..K-1 (TGRAPH_SIM_DEVICES=K)")
    ap.add_argument("--annotate", action="store_true",
                    help="annotate a random half of each program's lines with a device")
    a = ap.parse_args()
    DEV.update(host=a.devices, sim=a.sim, annotate=a.annotate)
    passed = failed = 0
    with tempfile.TemporaryDirectory() as work:
        for mode in a.mode.split(","):
            for case in CASES:
                msg = run_case(a.tgraph, mode, case, work)
                if msg:
                    failed += 1
                    print(f"FAIL {case[0]} [{mode}]: {msg}")
                    print(describe(case, mode))
                else:
                    passed += 1
                    print(f"PASS {case[0]} [{mode}]")
            for case in DERIV_CASES:
                msg = run_deriv_case(a.tgraph, mode, case, work)
                if msg:
                    failed += 1
                    print(f"FAIL {case[0]} [{mode}]: {msg}")
                    print(describe(case, mode))
                else:
                    passed += 1
                    print(f"PASS {case[0]} [{mode}]")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
