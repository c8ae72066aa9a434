#!/usr/bin/env python3
"""gpu-check bench-compiled's table: kiln's `bench zoo --compiled --device cuda --json` rows against
torch_zoo.py's rows (modes eager, default, reduce-overhead) of the same run, fp32, per workload:
step times, kiln compiled / torch.compile, and both compilers' cold compile times.
Usage: gpu_compiled_report.py KILN_JSONL TORCH_LOG OUT_JSON. Python 3 standard library only."""
import json
import os
import sys

from gpu_report import rows  # beside this script: the JSON lines of a log


def fmt(v, digits=2):
    return "-" if v is None else f"{v:.{digits}f}"


def main():
    kiln_path, torch_path, out_path = sys.argv[1:4]
    # Each phase's "default" row carries reduce_overhead_ms too; its "reduce-overhead" row is for
    # other readers (mode and mfu per row).
    kiln = {(r["model"], r.get("phase")): r for r in rows(kiln_path) if r.get("mode", "default") == "default"}
    torch = {(r["model"], r.get("mode")): r for r in rows(torch_path) if r.get("prec", "fp32") == "fp32"}
    models = sorted({m for m, _ in kiln} | {m for m, _ in torch})
    table = []
    for m in models:
        tr, st = kiln.get((m, "train"), {}), kiln.get((m, "step"), {})
        te, td, tro = (torch.get((m, k), {}) for k in ("eager", "default", "reduce-overhead"))
        row = {
            "model": m,
            "kiln_eager_ms": tr.get("eager_ms"),
            "kiln_compiled_ms": tr.get("compiled_ms"),
            "kiln_reduce_overhead_ms": tr.get("reduce_overhead_ms"),
            "kiln_whole_step_ms": st.get("compiled_ms"),
            "kiln_whole_step_reduce_overhead_ms": st.get("reduce_overhead_ms"),
            "kiln_compile_cold_s": tr.get("compile_cold_s"),
            "kiln_accuracy": tr.get("accuracy_pass"),
            "torch_eager_ms": te.get("step_ms"),
            "torch_default_ms": td.get("step_ms"),
            "torch_reduce_overhead_ms": tro.get("step_ms"),
            "torch_compile_s": td.get("compile_s"),
            "errors": [r["error"] for r in (tr, st, te, td, tro) if "error" in r],
        }
        best_torch = min([v for v in (row["torch_default_ms"], row["torch_reduce_overhead_ms"]) if v], default=None)
        best_kiln = min([v for v in (row["kiln_compiled_ms"], row["kiln_reduce_overhead_ms"], row["kiln_whole_step_ms"],
                                     row["kiln_whole_step_reduce_overhead_ms"]) if v], default=None)
        if best_torch and best_kiln:
            row["kiln_over_torch_compile"] = round(best_kiln / best_torch, 3)
        table.append(row)
    with open(out_path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(table, f, indent=1)
    os.replace(out_path + ".tmp", out_path)
    print("fp32 training step (forward + loss compiled, AdamW eager; whole step: all in one graph), ms")
    print("| model | kiln eager | kiln compiled | kiln r-o | kiln whole step | kiln whole step r-o | torch eager | torch.compile | torch r-o "
          "| best kiln / best torch.compile | kiln cold s | torch compile s | acc |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in table:
        print(f"| {r['model']} | {fmt(r['kiln_eager_ms'])} | {fmt(r['kiln_compiled_ms'])} | {fmt(r['kiln_reduce_overhead_ms'])} "
              f"| {fmt(r['kiln_whole_step_ms'])} | {fmt(r['kiln_whole_step_reduce_overhead_ms'])} | {fmt(r['torch_eager_ms'])} | {fmt(r['torch_default_ms'])} "
              f"| {fmt(r['torch_reduce_overhead_ms'])} | {fmt(r.get('kiln_over_torch_compile'), 3)} "
              f"| {fmt(r['kiln_compile_cold_s'])} | {fmt(r['torch_compile_s'], 1)} "
              f"| {'ok' if r['kiln_accuracy'] else ('-' if r['kiln_accuracy'] is None else 'FAIL')} |")
        for e in r["errors"]:
            print(f"|  | error: {e[:120]} |")


if __name__ == "__main__":
    main()
