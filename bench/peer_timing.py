"""peer_timing.py - the timing loop and the result line that the peer scripts
(w1_peers.py, w6_peers.py, w10c_peers.py, blas_peers.py) share, as the C benchmarks share
bench_util.h: untimed warm-up calls, then the median and minimum of N timed calls, and
the line bench/run.sh parses:
  NAME: median <t> ms, min <t> ms (<n> runs)
"""
import statistics
import time


def timeit(fn, runs, warmup, clock=time.perf_counter):
    """(median, min) in seconds of `runs` calls of fn, after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(runs):
        t0 = clock()
        fn()
        ts.append(clock() - t0)
    return statistics.median(ts), min(ts)


def report(name, med, mn, runs):
    """The result line, times in seconds in, milliseconds out."""
    print(f"{name}: median {med * 1e3:.3f} ms, min {mn * 1e3:.3f} ms ({runs} runs)", flush=True)
