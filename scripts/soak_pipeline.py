"""Soak of the input pipeline against damaged files and a shared cache (issue 42).

Generates 1,000 JPEGs (`ferroflow flowers`, 200 per class), damages 2% of them (20 files:
ten truncated to half, ten with garbage bytes in the middle of their entropy data), then runs
two `ferroflow pipeline --ignore-errors --cache FILE` processes over the same directory and
the same cache file at once, 20 epochs each, sampling each process's resident memory every
10 ms. Checks, for each process:

- every epoch delivers the same number of images (1,000 minus the files that failed);
- every damaged file that fails is counted (`ignored_errors=N` equals the number of files the
  warnings name, and every one of them is a damaged file) and no intact file is skipped;
- the first batches (`--dump`) of the two processes are identical (no wrong batch, whichever
  process wrote the cache and whichever replayed it), and equal to a run without a cache;
- resident memory is flat after epoch 2: the peak over the last five epochs is within 5% (or
  8 MB) of the peak over epochs 3–5.

Prints the figures and exits 1 if a check fails.

    python3 scripts/soak_pipeline.py [--binary target/release/ferroflow] [--epochs 20]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np


def damage(files, rng):
    """Truncates the first half of `files` to half their size and garbles the rest."""
    for i, f in enumerate(files):
        data = bytearray(open(f, "rb").read())
        if i < len(files) // 2:
            data = data[: len(data) // 2]
        else:
            start = len(data) // 3
            data[start : start + 64] = bytes(rng.integers(0, 256, 64, dtype=np.uint8))
        open(f, "wb").write(bytes(data))


def run(binary, args, samples):
    """Runs `binary args`, sampling its RSS (kB) with the epoch it is in; returns stdout, stderr."""
    p = subprocess.Popen([binary] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out_lines, err = [], []
    epoch = [1]

    def read_out():
        for line in p.stdout:
            out_lines.append(line)

    def read_err():
        # The pipeline says on stderr when each epoch starts.
        for line in p.stderr:
            err.append(line)
            m = re.match(r"\[pipeline\] epoch (\d+) of", line)
            if m:
                epoch[0] = int(m.group(1))

    threads = [threading.Thread(target=read_out), threading.Thread(target=read_err)]
    for t in threads:
        t.start()
    while p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/status") as s:
                rss = int(re.search(r"VmRSS:\s+(\d+)", s.read()).group(1))
            samples.append((epoch[0], rss))
        except (OSError, AttributeError):
            pass
        time.sleep(0.01)
    for t in threads:
        t.join()
    return p.returncode, "".join(out_lines), "".join(err)


def main():
    ap = argparse.ArgumentParser()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--binary", default=os.path.join(root, "target", "release", "ferroflow"))
    ap.add_argument("--epochs", type=int, default=20)
    a = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "flowers")
        subprocess.run([a.binary, "flowers", data, "--per-class", "200", "--size", "96x96"], check=True,
                       stdout=subprocess.DEVNULL)
        files = sorted(os.path.join(d, f) for d, _, fs in os.walk(data) for f in fs)
        rng = np.random.default_rng(42)
        damaged = sorted(rng.choice(files, 20, replace=False).tolist())
        damage(damaged, rng)
        cache = os.path.join(tmp, "cache", "images")
        os.makedirs(os.path.dirname(cache))
        common = ["pipeline", data, "--size", "64", "--batch", "32", "--no-shuffle", "--ignore-errors",
                  "--parallel", "2", "--prefetch", "2"]
        # A reference without a cache: its first batches.
        ref_dump = os.path.join(tmp, "ref.npz")
        rc, out, err = run(a.binary, common + ["--epochs", "1", "--dump", ref_dump, "--dump-batches", "3"], [])
        if rc != 0:
            print("reference run failed:", err[-2000:])
            return 1
        results = [None, None]
        samples = [[], []]

        def worker(i):
            dump = os.path.join(tmp, f"dump{i}.npz")
            results[i] = run(a.binary, common + ["--epochs", str(a.epochs), "--cache", cache, "--dump", dump,
                                                 "--dump-batches", "3"], samples[i]) + (dump,)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
        for i, t in enumerate(threads):
            t.start()
            time.sleep(0.5 * i)
        for t in threads:
            t.join()
        ref = dict(np.load(ref_dump))
        for i, (rc, out, err, dump) in enumerate(results):
            print(f"== process {i}: exit {rc}")
            if rc != 0:
                print(err[-2000:])
                ok = False
                continue
            images = [int(m.group(1)) for m in re.finditer(r"epoch \d+: (\d+) images", out)]
            ignored = int(re.search(r"ignored_errors=(\d+)", out).group(1))
            named = sorted(set(f for f in damaged if f in err) | set(f for f in files if f in err and f not in damaged))
            wrong = [f for f in named if f not in damaged]
            print(f"images per epoch: {sorted(set(images))} over {len(images)} epochs; ignored_errors={ignored}; "
                  f"damaged files named in warnings: {len(named)} of {len(damaged)} damaged")
            if len(images) != a.epochs or len(set(images)) != 1 or images[0] != len(files) - ignored:
                print("FAIL: epochs deliver different numbers of images")
                ok = False
            if wrong or ignored != len(named):
                print(f"FAIL: intact files skipped ({wrong}) or the count ({ignored}) differs from the named files")
                ok = False
            got = dict(np.load(dump))
            same = sorted(got) == sorted(ref) and all(np.array_equal(got[k], ref[k]) for k in ref)
            print(f"first 3 batches equal to the uncached run: {same}")
            ok &= same
            def peak(lo, hi):
                return max((r for e, r in samples[i] if lo <= e <= hi), default=0)

            first, settled, last = peak(1, 2), peak(3, 5), peak(a.epochs - 4, a.epochs)
            print(f"peak RSS: epochs 1-2 {first / 1024:.1f} MB, epochs 3-5 {settled / 1024:.1f} MB, "
                  f"epochs {a.epochs - 4}-{a.epochs} and the exit {last / 1024:.1f} MB")
            if last > max(settled * 1.05, settled + 8 * 1024):
                print("FAIL: memory grows after epoch 2")
                ok = False
    print("soak:", "ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
