#!/usr/bin/env bash
# One device call: calibrate + sweeps + predictions, the hardware suite, repeat sweeps.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib
o=$OUT; b=.gpu/bin/dmalab
t0=$(date +%s); st(){ echo "$(( $(date +%s)-t0 ))s $*" >> $o/steps.txt; }
tools/gpu_bandwidth $o/bw; st "bw rc=$?"
tar czf $o/bw.tgz -C $o bw
for w in bf16 i8_ring; do python3 tools/compare_prediction.py $o/bw/hw_$w.csv $o/bw/sim_$w.csv; done
tools/gpu_suite $o/suite; st "suite rc=$?"
tar czf $o/suite.tgz -C $o suite
mkdir -p $o/rep
S=(sweep --ranks=4 -b 1M -e 1G -f 2 -n 20 -w 5 --backend=hw --gpus=1 -c 0)
for i in 1 2; do $b "${S[@]}" --csv=$o/rep/plain_$i.csv > $o/rep/plain_$i.txt 2>&1; st "rep $i"; done
taskset -c 3 $b "${S[@]}" --csv=$o/rep/pinned.csv > $o/rep/pinned.txt 2>&1; st pinned
tar czf $o/rep.tgz -C $o rep
for f in $o/rep/*.csv; do python3 tools/compare_prediction.py $f $o/bw/sim_bf16.csv | tail -1; done
rm -rf $o/bw $o/suite $o/rep
cat $o/steps.txt
