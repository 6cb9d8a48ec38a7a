#!/usr/bin/env bash
# The search's cost on a real GPU: ladder (strategy=model), ladder without the idle rule (descent_idle_util=null)
# and the plain walk (strategy=walk), each a real sweep of the demo case with samples/s as the objective, at each
# emulated card; then scripts/search_cost_summary.py prints trial-seconds side by side and where the time went.
# About 6 minutes on one H200 for the two default cards.
#
#     scripts/bench_search_gpu.sh OUT_DIR            # CARDS="0.6 1.5" WINDOW_S=8 by default
set -u
out=${1:?usage: scripts/bench_search_gpu.sh OUT_DIR}
py=${PYTHON:-python3}
mkdir -p "$out"
for card in ${CARDS:-0.6 1.5}; do
    for variant in model model_off walk; do
        case $variant in
            model) extra=(strategy=model) ;;
            model_off) extra=(strategy=model descent_idle_util=null) ;;
            walk) extra=(strategy=walk) ;;
        esac
        t0=$SECONDS
        timeout -k 10 300 "$py" -m ladder.search case=amp_pi_plus device=cuda "sweep=g${card}_$variant" "${extra[@]}" \
            objective=samples_per_s "measure.window_s=${WINDOW_S:-8}" reuse=false "workload.emulate_gpu_mem_gb=$card" \
            "output_root=$out/out" >"$out/g${card}_$variant.log" 2>&1
        echo "== card=$card $variant rc=$? wall=$((SECONDS - t0)) s"
        grep -E "^(best|  )" "$out/g${card}_$variant.log" | tail -n 12
    done
done
"$py" "$(dirname "$0")/search_cost_summary.py" "$out/out"
