#!/bin/bash
# Run 8: ncu of capsule_runs, batch_rows and cuda_staged at MNIST b128 and b512 (run 7's binaries): what the
# kernels move through DRAM and L2, and how busy they keep it. ncu locks the clocks to base, so its times are
# longer than the bench's.
G=/tmp/bin; mkdir -p $G; for b in halcaps; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum
M=$M,lts__t_bytes.sum,l1tex__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active
M=$M,launch__registers_per_thread,launch__grid_size,launch__block_size,smsp__inst_executed.sum
for shape in mnist_b128 mnist_b512; do
  for impl in capsule_runs batch_rows cuda_staged; do
    echo "== $shape $impl" >> $OUT/ncu.txt
    ncu --metrics $M -k regex:'u_hat|staged' $G/halcaps bench --device cuda --op predict --shapes $shape \
      --implementations $impl --repeats 1 --warmup 0 --seed 3801 > /tmp/ncu_one.txt 2>&1
    grep -E "u_hat|staged|gpu__time|dram__|lts__|l1tex__|warps_active|launch__|inst_executed" /tmp/ncu_one.txt | tail -24 >> $OUT/ncu.txt
  done
done
cat $OUT/ncu.txt | head -150
