"""Roofline for the side-by-side bench: numpy's sgemm (OpenBLAS) on a block's four weight GEMMs.

  python3 roofline.py '{"ns": [256, 1120], "threads": [1, 2], "runs": 5, "wait_s": 300, "gemms": {"256": [[256, 1152, 3456], ...]}}'

For each N and thread count: every GEMM [M, K] x [K, N'] (f32, C-contiguous) is warmed up once and
timed `runs` times; roofline GFLOP/s = sum of 2*M*K*N' over the GEMMs / sum of their median times.
Before each shape, and after a rejected call, it waits for the machine to be quiet (at most wait_s
seconds in all; then no more waiting, and no repeats past `runs`: such rows say "unquiet"); a timed
call during which other processes used more than 10% of the cores is rejected and repeated (at most
4*runs attempts), as quiet.mjs does.
Prints one JSON object. The caller unsets OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE for this process
only (they pin an older, slower kernel on some machines); which kernel runs is reported (corename).
"""
import ctypes
import json
import os
import sys
import time

import numpy as np

QUIET, REJECT = 0.05, 0.10
CORES = os.cpu_count() or 1


HAVE_PROC = os.path.exists("/proc/stat")  # elsewhere (macOS) no load is measured: every call is kept


def busy_s():
    if not HAVE_PROC:
        return 0.0
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / os.sysconf("SC_CLK_TCK")


def own_s():
    t = os.times()
    return t.user + t.system


def measure(fn):
    b0, o0, t0 = busy_s(), own_s(), time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    own = own_s() - o0
    return wall, max(0.0, (busy_s() - b0 - own) / (CORES * wall)) if HAVE_PROC else 0.0


class Waiter:
    """Waits for a quiet machine within a budget of seconds shared by the whole run."""

    def __init__(self, budget_s):
        self.left, self.waited = budget_s, 0.0

    def __call__(self):
        t0, ok = time.perf_counter(), 0
        while time.perf_counter() - t0 < min(self.left, 60.0):
            _, f = measure(lambda: time.sleep(0.3))
            ok = ok + 1 if f < QUIET else 0
            if ok >= 2:
                break
        spent = time.perf_counter() - t0
        self.left, self.waited = max(0.0, self.left - spent), self.waited + spent

    @property
    def spent(self):
        return self.left <= 0


def openblas():
    """The OpenBLAS library numpy loaded (from /proc/self/maps): ctypes handle and symbol prefix/suffix."""
    try:
        with open("/proc/self/maps") as f:
            libs = sorted({ln.split()[-1] for ln in f if "openblas" in ln.lower() and ".so" in ln})
    except OSError:
        libs = []
    for path in libs:
        lib = ctypes.CDLL(path)
        for pre, suf in (("", ""), ("scipy_", "64_"), ("scipy_", ""), ("", "64_")):
            if hasattr(lib, f"{pre}openblas_get_corename{suf}"):
                return lib, pre, suf, path
    return None, "", "", None


def main():
    job = json.loads(sys.argv[1])
    runs, noisy = job["runs"], job.get("noisy", False)
    wait_quiet = Waiter(0.0 if noisy else job.get("wait_s", 300.0))
    lib, pre, suf, path = openblas()
    info = {"numpy": np.__version__, "openblas": path, "corename": None, "config": None, "rows": []}
    if lib is not None:
        get = lambda n: getattr(lib, f"{pre}{n}{suf}")
        get("openblas_get_corename").restype = ctypes.c_char_p
        get("openblas_get_config").restype = ctypes.c_char_p
        info["corename"] = get("openblas_get_corename")().decode()
        info["config"] = get("openblas_get_config")().decode()
        set_threads = get("openblas_set_num_threads")
    rng = np.random.default_rng(1)
    for threads in job["threads"]:
        if lib is None and threads != CORES:
            continue  # cannot set the thread count without the library handle
        if lib is not None:
            set_threads(ctypes.c_int(threads))
        for n in job["ns"]:
            flops = secs = 0.0
            rejected, unquiet = 0, False
            for m, k, nn in job["gemms"][str(n)]:
                a = rng.standard_normal((m, k), dtype=np.float32)
                b = rng.standard_normal((k, nn), dtype=np.float32)
                c = np.empty((m, nn), dtype=np.float32)
                np.matmul(a, b, out=c)  # warm-up
                kept, all_walls = [], []
                for _ in range(4 * runs):
                    if len(kept) >= runs or (wait_quiet.spent and len(all_walls) >= runs):
                        break
                    if not noisy and (not all_walls or len(kept) < len(all_walls)):
                        wait_quiet()  # before each shape; before every call once one was rejected
                    wall, foreign = measure(lambda: np.matmul(a, b, out=c))
                    all_walls.append(wall)
                    if noisy or foreign <= REJECT:
                        kept.append(wall)
                    else:
                        rejected += 1
                unquiet = unquiet or len(kept) < runs
                kept = sorted(kept if len(kept) >= runs else all_walls)  # never quiet: the loaded figure, flagged
                flops += 2.0 * m * k * nn
                secs += kept[len(kept) // 2]
            info["rows"].append({"n": n, "threads": threads, "gflops": flops / secs / 1e9, "rejected": rejected, "unquiet": unquiet})
    info["waited_s"] = wait_quiet.waited
    print(json.dumps(info))


if __name__ == "__main__":
    main()
