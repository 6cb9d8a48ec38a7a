#!/usr/bin/env bash
# ladder's GPU paths on a real NVIDIA machine, in one short run (about 5 minutes on one GPU):
#   1. the machine: nvidia-smi, torch's view of the card;
#   2. the NVML sampler on the idle card (scripts/gpu_window.py, 3 s);
#   3. a real CUDA out-of-memory under an emulated smaller card (the proxy's --fault oom under
#      torch.cuda.set_per_process_memory_fraction), classified by `python -m ladder.failures`;
#   4. the demo sweep on the GPU: torchrun with one rank per GPU, NCCL with the validated environment, the
#      emulated 0.6 GB card, NVML measuring util and memory, preflight before each launch;
#   5. the same demo sweep again under another name: every trial is reused from the first, nothing launches;
#   6. the demo case started twice at once with a GPU lease per trial: the two processes take turns;
#   7. a sweep at MimicKit's full net width under an emulated 3 GB card, objective samples/s, both profiles: the
#      memory model on CUDA figures, and the descent below the largest fit (with cut trials);
#   8. the demo sweep with its card held by a ballast (workload.emulate_by=ballast) instead of torch's memory
#      fraction, and the two sweeps' walks side by side (scripts/compare_walks.py: same statuses, same pick);
#   9. every card's answer (scripts/bench_cards.py) under the ballast: a sweep on a 2 GB card predicts 0.8 and
#      4 GB, and sweeps there with and without history confirm it;
#  10. energy: the demo's best row (step 4) with its samples per joule, joules and mean power, and whether NVML's
#      energy counter or its power draw integrated gave them (energy_counter 1 or 0); rc 1 where an ok row has none;
#  11. a third-party torch trainer (docs/recipes.md's Lightning recipe, where lightning is installed) under a
#      ballast-held 2 GB card: its top rung runs out of memory in its own allocator, the rung below is measured,
#      its figures net of the ballast (ballast_mb beside them).
# Each step has its own time limit and the script goes on after a failed step; every log and sweep folder is
# packed into OUT_DIR/runs.tgz, and OUT_DIR/check.log holds what each step printed last.
#
#     scripts/gpu_check.sh OUT_DIR
#     GPU_CHECK_STEPS="machine cuda_oom cuda_oom_verdict demo_sweep" scripts/gpu_check.sh OUT_DIR   # just these steps
set -u
out=${1:?usage: scripts/gpu_check.sh OUT_DIR}
py=${PYTHON:-python3}
mkdir -p "$out"
out=$(cd "$out" && pwd)  # absolute: some steps run elsewhere
work=$(mktemp -d)
log="$out/check.log"
: >"$log"

step() {  # step NAME LIMIT_S COMMAND...: run it, say its exit code and time, keep its output
    local name=$1 limit=$2
    shift 2
    if [ -n "${GPU_CHECK_STEPS:-}" ] && [[ " $GPU_CHECK_STEPS " != *" $name "* ]]; then
        return 0
    fi
    local t0=$SECONDS
    timeout -k 10 "$limit" "$@" >"$work/$name.log" 2>&1
    local rc=$?
    {
        echo "== $name: rc=$rc in $((SECONDS - t0)) s"
        tail -n 40 "$work/$name.log"
        echo
    } | tee -a "$log"
}

step machine 60 bash -c "nvidia-smi --query-gpu=index,name,memory.total,memory.used,driver_version --format=csv \
    && $py -c 'import torch; print(torch.__version__, torch.cuda.is_available(), torch.cuda.get_device_name(0), \
    torch.cuda.nccl.version())'"

step nvml_window 30 "$py" scripts/gpu_window.py --seconds 3

mkdir -p "$work/oom"
step cuda_oom 60 "$py" -m torch.distributed.run --nproc-per-node 1 --master-port 29533 \
    -m ladder.workloads.proxy --agent-config tests/data/mimickit/data/agents/amp_pi_plus_agent.yaml --method amp --device cuda --emulate-mem-mb 1024 \
    --fault oom --fault-iter 2 --max-seconds 60 --progress "$work/oom/progress.jsonl"
cp "$work/cuda_oom.log" "$work/oom/stdout.log"
step cuda_oom_verdict 30 "$py" -m ladder.failures "$work/oom/stdout.log" --exit-code 1

step demo_sweep 150 "$py" -m ladder.search case=amp_pi_plus device=cuda sweep=gpu_demo \
    "output_root=$work/out"

step demo_again 60 "$py" -m ladder.search case=amp_pi_plus device=cuda sweep=gpu_demo_again \
    "output_root=$work/out"

# the same case started twice at once, one GPU leased per trial: the two take turns, no rung runs twice
step twice 150 bash -c "$py -m ladder.search case=amp_pi_plus device=cuda sweep=gpu_twice profile=[default] \
    reuse=false workload.gpus_per_trial=1 workload.lease_dir=$work/leases output_root=$work/out >$work/twice_a.log 2>&1 &
    $py -m ladder.search case=amp_pi_plus device=cuda sweep=gpu_twice profile=[default] \
    reuse=false workload.gpus_per_trial=1 workload.lease_dir=$work/leases output_root=$work/out >$work/twice_b.log 2>&1
    b=\$?; wait \$!; a=\$?; echo rc_a=\$a rc_b=\$b; grep -h 'waiting for\|^best' $work/twice_a.log $work/twice_b.log"

step wide_sweep 240 "$py" -m ladder.search case=amp_humanoid device=cuda sweep=gpu_wide "output_root=$work/out" \
    workload.width_factor=1.0 workload.emulate_gpu_mem_gb=3 objective=samples_per_s measure.window_s=5

step ballast_demo 150 "$py" -m ladder.search case=amp_pi_plus device=cuda sweep=gpu_ballast \
    workload.emulate_by=ballast "output_root=$work/out"

step ballast_vs_fraction 30 "$py" scripts/compare_walks.py "$work/out/case_gpu_bench_gpu_demo" \
    "$work/out/case_gpu_bench_gpu_ballast"

# every card's answer under the ballast: swept on a 2 GB card, predicted for 0.8 and 4 GB, both swept with and
# without history (the table's last lines: how many cells the prediction got right, the launches with history)
step cards 300 "$py" scripts/bench_cards.py --case amp_pi_plus --cards 2,0.8,4 --device cuda \
    --set workload.emulate_by=ballast --root "$work/cards"

# samples per joule of the demo's pick: NVML's energy over its window (docs/outputs.md, Energy)
step energy 30 "$py" -c 'import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
keys = ("case", "variant", "num_envs", "status", "samples_per_s", "samples_per_joule", "samples_per_joule_lo",
        "samples_per_joule_hi", "energy_j", "avg_power_w", "energy_counter", "window_s")
for row in rows:
    print(" ".join(f"{k}={row.get(k, str())}" for k in keys))
sys.exit(0 if rows and all(r.get("samples_per_joule") for r in rows if r["status"] == "ok") else 1)' \
    "$work/out/case_gpu_bench_gpu_demo/best_by_case.tsv"

mkdir -p "$work/lightning"
if "$py" -c "import lightning" 2>/dev/null; then
    "$py" -c "from tests.helpers import recipe; import sys; sys.stdout.write(recipe('torchrun DDP with Lightning')[0])" \
        >"$work/lightning/train_lightning.py"
    ( cd "$work/lightning" && step ballast_lightning 300 "$py" -m ladder.search workload.kind=command \
        case=my_lightning device=cuda sweep=gpu_lightning workload.launcher=torchrun workload.nproc=1 \
        'workload.cmd="python train_lightning.py --num-envs {num_envs}"' \
        "workload.progress_regex='iter (?P<iter>\d+) samples (?P<samples>\d+)'" \
        'ladder.rungs=[1048576,16384]' 'profile=[default]' workload.emulate_gpu_mem_gb=2 \
        measure.window_s=6 measure.warmup_timeout_s=120 "output_root=$work/out" )
else
    echo "== ballast_lightning: skipped (lightning is not installed: pip install lightning)" | tee -a "$log"
fi

for f in "$work"/out/*/trials.tsv; do  # the trials, a line each, with the figures the walk decided by
    [ -f "$f" ] && "$py" - "$f" <<'EOF' | tee -a "$log"
import csv, sys
print("==", sys.argv[1])
keys = ("variant", "num_envs", "phase", "status", "reason", "cap_used_mb", "cap_mb", "ballast_mb", "ballast_card_mb",
        "max_mem0", "avg_util0",
        "samples_per_s", "samples_per_joule", "avg_power_w", "duration_s", "why")
for row in csv.DictReader(open(sys.argv[1]), delimiter="\t"):
    print(" ".join(f"{k}={row.get(k, '')}" for k in keys))
EOF
done
tar -C "$work" -czf "$out/runs.tgz" --exclude='*.pt' . 2>/dev/null
ls -la "$out"
