for n in halcaps halcaps_prev; do xz -dc .gpu/$n.xz > /tmp/$n; chmod +x /tmp/$n; done
for r in 1 2; do for n in halcaps_prev halcaps; do echo "== $n"; timeout 60 /tmp/$n bench --device cuda --op digitcaps --shapes mnist_b128 --implementations cuda_tensor --repeats 30 --seed 900$r 2>&1 | tail -1; done; done
OUT=$OUT bash bench/results/nvidia-h200-resident-layer/run0/r0.sh > $OUT/r0.log 2>&1; tail -30 $OUT/r0.log
