#!/bin/bash
# Run 15: run 14's question at more batch sizes: capsule_runs against batch_rows at b256 (in_dim 8, out_caps
# 20 to 32), and against batch_vectors (the default where neither batch_rows nor batch_walk fits) at small
# batches: b32 and b64 at in_dim 8 and 16. The committed binaries of run 13.
G=/tmp/bin; mkdir -p $G; for b in halcaps; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps bench --device cuda --op predict --shapes 256:1152:8:20:16,256:1152:8:24:16,256:1152:8:32:16 \
  --implementations capsule_runs,batch_rows --repeats 30 --seed 4511 > $OUT/b256.txt 2>&1; echo "rc $?" >> $OUT/b256.txt
$G/halcaps bench --device cuda --op predict \
  --shapes 32:1152:8:10:16,64:1152:8:10:16,32:1152:16:10:16,64:1152:16:10:16,64:1152:16:16:16,64:1152:16:32:16,64:2048:16:32:16,128:2048:16:32:16 \
  --implementations capsule_runs,batch_vectors --repeats 30 --seed 4512 > $OUT/small_batch.txt 2>&1; echo "rc $?" >> $OUT/small_batch.txt
grep -hE "^predict " $OUT/b256.txt $OUT/small_batch.txt | awk '{print $2, $3, $6}'
