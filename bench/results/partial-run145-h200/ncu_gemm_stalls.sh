#!/usr/bin/env bash
# The stall breakdown of two gemm_variants builds (call 3 of partial run 145).
set -uo pipefail
VARIANTS="base:0 foldsmem:65536" NOACC=1 bash bench/gemm_variants.sh >/tmp/gv.txt 2>&1; tail -4 /tmp/gv.txt
m=""
for r in barrier branch_resolving dispatch_stall drain imc_miss lg_throttle long_scoreboard math_pipe_throttle membar mio_throttle misc no_instruction not_selected selected short_scoreboard sleeping tex_throttle wait; do
  m="$m,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"; done
m=${m#,},smsp__inst_executed.sum,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_shared_st.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,sm__warps_active.avg.pct_of_peak_sustained_active
for n in base foldsmem; do
  NOACC=1 REPS=1 ncu -k regex:gemm_tiles -c 1 --metrics $m /tmp/gemm_variants/probe_$n $n 2>&1 | grep -E "stalled|inst_executed|bank|warps_active" | sed -E 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | awk -v n=$n '{print n, $1, $NF}'
done
