"""The gemm rows of samebits_bench_gpu JSON files that decide the canonical block length: time
of the portable and cuBLAS GEMMs on the large shapes, and the accuracy rows.

    python3 bench/gemm_rows.py gpu_bench.json [...]
"""
import json, sys
for path in sys.argv[1:]:
    rows = json.load(open(path))["rows"]
    print("==", path)
    for r in rows:
        if r.get("family") != "gemm" or r["op"] not in ("gemm", "gemm_accuracy"):
            continue
        if r["op"] == "gemm_accuracy" or r["variant"] in ("cuda.tiled", "cuda.cublas") and (
                "4096^3" in r["shape"] or "dW" in r["shape"] or "8192" in r["shape"]
                or "[1M x 128]@[128x128]" in r["shape"]):
            print(f'{r["op"]:14s} {r["shape"]:42s} {r["variant"]:12s} {r["ms"]:.4f} {r["note"]}')
