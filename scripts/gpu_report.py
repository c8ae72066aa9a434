#!/usr/bin/env python3
"""gpu-check's table: kiln's `bench zoo --json` rows against torch_zoo.py's eager rows of the same
run, per workload and precision: step time and peak memory of both, their ratios, and MFU.
Usage: gpu_report.py KILN_JSONL TORCH_LOG OUT_JSON. Python 3 standard library only."""
import json
import sys


def rows(path):
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        out.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass
    except FileNotFoundError:
        pass
    return out


def main():
    kiln_path, torch_path, out_path = sys.argv[1:4]
    kiln = {(r["model"], r.get("prec")): r for r in rows(kiln_path)}
    torch = {(r["model"], r.get("prec")): r for r in rows(torch_path) if r.get("mode", "eager") == "eager"}
    table = []
    for key in sorted(set(kiln) | set(torch)):
        k, t = kiln.get(key, {}), torch.get(key, {})
        row = {"model": key[0], "precision": key[1], "kiln": k, "torch": t}
        if "eager_ms" in k and "step_ms" in t:
            row["ratio"] = round(k["eager_ms"] / t["step_ms"], 3)
        if k.get("peak_mb") is not None and t.get("peak_gib") is not None:
            row["peak_ratio"] = round(k["peak_mb"] / (t["peak_gib"] * 1024), 3)
        table.append(row)
    with open(out_path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(table, f, indent=1)
    import os
    os.replace(out_path + ".tmp", out_path)
    print("| model | prec | kiln eager ms | torch eager ms | kiln / torch | kiln peak MB | torch peak MB | MFU |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in table:
        k, t = r["kiln"], r["torch"]
        kms = f'{k["eager_ms"]:.2f}' if "eager_ms" in k else ("error: " + k.get("error", "not run")[:60])
        tms = f'{t["step_ms"]:.2f}' if "step_ms" in t else ("error" if "error" in t else "-")
        ratio = f'{r["ratio"]:.2f}' if "ratio" in r else "-"
        kpk = f'{k["peak_mb"]:.0f}' if k.get("peak_mb") is not None else "-"
        tpk = f'{t["peak_gib"] * 1024:.0f}' if t.get("peak_gib") is not None else "-"
        mfu = f'{k["mfu"]:.3f}' if "mfu" in k else "-"
        print(f"| {r['model']} | {r['precision']} | {kms} | {tms} | {ratio} | {kpk} | {tpk} | {mfu} |")


if __name__ == "__main__":
    main()
