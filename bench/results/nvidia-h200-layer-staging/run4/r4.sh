#!/bin/bash
# Run 4: the committed binaries: every DigitCaps layer implementation, forward and backward, at MNIST b128 and
# b512 (chart digitcaps.png, drawn from digitcaps.json on the build machine), then the PyTorch peers.
G=/tmp/bin; mkdir -p $G; for b in halcaps; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --repeats 30 --seed 5401 \
  --json $OUT/digitcaps.json --markdown $OUT/digitcaps.md > $OUT/digitcaps.txt 2>&1; echo "rc $?" >> $OUT/digitcaps.txt
$G/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --repeats 30 --seed 5402 \
  > $OUT/digitcaps_backward.txt 2>&1; echo "rc $?" >> $OUT/digitcaps_backward.txt
grep -hE "^digitcaps|copy|^rc" $OUT/digitcaps.txt $OUT/digitcaps_backward.txt | cut -c1-150
python3 bench/pytorch_digitcaps.py --shapes 128 512 --repeats 30 > $OUT/pytorch.txt 2>&1; grep -E '"us"' $OUT/pytorch.txt | cut -c1-200
