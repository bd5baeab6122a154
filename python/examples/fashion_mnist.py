"""Trains the Fashion-MNIST MLP of examples/fashion_mnist.c from Python.

    PYTHONPATH=python /usr/bin/python3 python/examples/fashion_mnist.py [--epochs N]
        [--batch B] [--lr LR] [--mode vm|c|reference] [--threads T] [--steps S]
        [--seed S] [--data DIR]

The same model as the C example: 784-256-10 with relu, softmax cross-entropy, Adam with
bias correction and a cosine learning-rate decay, He initialisation drawn with tgraph's
random numbers. The parameters, Adam's moments and the step counter are shared
variables updated by ONE compiled training step, so they stay inside it between calls
(no copies); a call takes the batch (u8 pixels, i64 labels) and the learning rate and
returns the loss. Reads the gzipped IDX files of Debian's dataset-fashion-mnist; without
them it says so and exits with status 0 (nothing to train on is not a failure).
"""
import argparse
import gzip
import math
import os
import sys
import time

import numpy as np

import tgraph as tg

NIN, NHID, NOUT = 784, 256, 10


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(data_dir, split):
    x = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz")).reshape(-1, NIN)
    y = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz")).astype(np.int64)
    return x, y


def init_weights(seed):
    """He initialisation, W ~ Normal(0, 2 / fan_in), with tgraph's random numbers."""
    ks = tg.key_split(tg.key(seed=seed), n=2)
    ws = [tg.normal(ks[i], shape=shape, dtype="float32") * math.sqrt(2.0 / shape[0])
          for i, shape in enumerate([(NIN, NHID), (NHID, NOUT)])]
    return tg.function([], ws)()


def logits_of(x, W1, b1, W2, b2):
    xf = x.astype("float32") * (1.0 / 255.0)
    z = xf @ W1 + b1
    h = tg.where(z > 0.0, z, 0.0)  # relu
    return h @ W2 + b2


def build(batch, seed, mode, threads):
    w1, w2 = init_weights(seed)
    params = [tg.shared(w1, name="W1"), tg.shared(np.zeros(NHID, np.float32), name="b1"),
              tg.shared(w2, name="W2"), tg.shared(np.zeros(NOUT, np.float32), name="b2")]
    x = tg.tensor("x", dtype="uint8", shape=(batch, NIN))
    y = tg.tensor("y", dtype="int64", shape=(batch,))
    lr = tg.tensor("lr", dtype="float32", shape=())
    logp = tg.log_softmax(logits_of(x, *params), axis=1)
    onehot = tg.eq(tg.expand_dims(y, axis=[1]),
                   tg.arange(start=0, stop=NOUT, step=1, dtype="int64")).astype("float32")
    loss = -tg.mean(tg.sum(onehot * logp, axis=1))
    grads = tg.grad(loss, params)
    # Adam with bias correction
    b1, b2, eps = 0.9, 0.999, 1e-8
    t = tg.shared(np.float32(0), name="t")
    t1 = t + 1.0
    step = lr * tg.sqrt(1.0 - b2 ** t1) / (1.0 - b1 ** t1)
    updates = {t: t1}
    for p, g in zip(params, grads):
        m = tg.shared(np.zeros(p.shape, np.float32), name="m_" + p.name)
        v = tg.shared(np.zeros(p.shape, np.float32), name="v_" + p.name)
        m1 = m * b1 + g * (1 - b1)
        v1 = v * b2 + g * g * (1 - b2)
        updates.update({m: m1, v: v1, p: p - step * (m1 / (tg.sqrt(v1) + eps))})
    train = tg.function([x, y, lr], loss, updates=updates, mode=mode, nthreads=threads,
                        name="train_step")
    xe = tg.tensor("x", dtype="uint8", shape=(None, NIN))
    ye = tg.tensor("y", dtype="int64", shape=(None,))
    correct = tg.sum(tg.eq(tg.argmax(logits_of(xe, *params), axis=1), ye))
    evaluate = tg.function([xe, ye], correct, mode=mode, nthreads=threads, name="evaluate")
    return train, evaluate, params


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--mode", default="vm", choices=["vm", "c", "reference"])
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--steps", type=int, default=0, help="stop after this many steps")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--expect-accuracy", type=float, default=0.0)
    o = ap.parse_args(argv)
    if not os.path.exists(os.path.join(o.data, "train-images-idx3-ubyte.gz")):
        print(f"Fashion-MNIST not found in {o.data} (Debian: apt-get install "
              "dataset-fashion-mnist): nothing to train")
        return 0
    X, Y = load(o.data, "train")
    Xt, Yt = load(o.data, "t10k")
    t0 = time.perf_counter()
    train, evaluate, params = build(o.batch, o.seed, o.mode, o.threads)
    print(f"model: MLP 784-256-10 (relu), softmax cross-entropy, Adam (lr {o.lr:g}, cosine "
          f"decay), batch {o.batch}; backend {o.mode}; compiled in "
          f"{time.perf_counter() - t0:.2f} s")
    B = o.batch
    per_epoch = len(X) // B * B
    total = o.epochs * per_epoch
    if o.steps:
        total = min(total, o.steps * B)
        o.epochs = -(-total // per_epoch)
    done, train_time = 0, 0.0
    rng = np.random.default_rng(o.seed)
    lr = np.zeros((), np.float32)
    for ep in range(o.epochs):
        order = rng.permutation(len(X))
        te = time.perf_counter()
        losses = []
        for s in range(0, len(X) - B + 1, B):
            if done >= total:
                break
            idx = order[s:s + B]
            lr[()] = o.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * done / total)))
            losses.append(train(X[idx], Y[idx], lr))
            done += B
        train_time += time.perf_counter() - te
        loss = float(np.mean(losses))
        if not math.isfinite(loss):
            print(f"the loss is {loss} at epoch {ep + 1}: lower --lr", file=sys.stderr)
            return 1
        acc = 100.0 * float(evaluate(Xt, Yt)) / len(Xt)
        print(f"epoch {ep + 1:2d}: training loss {loss:.4f}, test accuracy {acc:.2f}%",
              flush=True)
    steps = done // B
    print(f"trained {steps} steps in {train_time:.2f} s ({done / train_time:.0f} examples/s, "
          f"{1e3 * train_time / steps:.3f} ms per step)")
    print(f"test accuracy: {acc:.1f}%")
    if acc < o.expect_accuracy:
        print(f"test accuracy {acc:.1f}% is below --expect-accuracy {o.expect_accuracy}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
