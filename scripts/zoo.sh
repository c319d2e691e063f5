#!/usr/bin/env bash
# The zoo on SMAC's 3m: every --config that trains on SMAC, 3 seeds, 200k env steps (t_max 205,000 so
# that the test at 200k is logged), each preset unchanged but t_max, on the built-in simulator. Each
# config is one src/sweep.py sweep (seeds 0, 1, 2 one after another); two sweeps run at a time, one
# per core (JOBS=1 for one), each run's training step on one thread. Run it again to go on: finished runs are skipped,
# interrupted ones resumed (src/sweep.py).
#
#   bash scripts/zoo.sh RESULTS_FOLDER [CONFIG ...]      # default: every config below
#   python scripts/keep_records.py RESULTS_FOLDER/sacred docs/results/zoo   # the finished runs' records
#   python scripts/results_table.py docs/results/zoo --at 50000 100000 200000 --mean
set -euo pipefail
cd "$(dirname "$0")/.."
results=$(realpath -m "${1:?usage: bash scripts/zoo.sh RESULTS_FOLDER [CONFIG ...]}")
mkdir -p "$results"
shift
configs=("$@")
if [ ${#configs[@]} -eq 0 ]; then
    configs=(qmix vdn iql qatten qplex ow_qmix cw_qmix qtran qmix_att qmix_conv coma ippo vmix lica dop riit
             riit_online iql_td_lambda qmix_large qmix_high_sample_efficiency qmix_increase_eps_time
             qmix_decrease_eps_time
             iql_epymarl vdn_epymarl qmix_epymarl iql_ns vdn_ns qmix_ns ia2c maa2c mappo ippo_epymarl ia2c_ns maa2c_ns
             mappo_ns ippo_ns coma_epymarl coma_ns pac pac_ns pac_dcg pac_dcg_ns maddpg maddpg_ns)
fi
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
printf '%s\n' "${configs[@]}" | xargs -P "${JOBS:-2}" -I{} sh -c \
    'python src/sweep.py --config={} --env-config=sc2 --seeds 3 --max-parallel 1 \
         with env_args.map_name=3m t_max=205000 learner_threads=1 local_results_path="$0" > "$0/zoo_{}.log" 2>&1 \
     && echo "{}: done" || echo "{}: failed (see $0/zoo_{}.log)"' "$results"
