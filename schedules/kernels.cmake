# Every (operator, schedule, device) combination built into its own AOT
# library. The schedule names are those of capsule_prediction_schedules.cpp.
# Adding a line here makes the kernel callable through the runtime by name.

#                 generator                     schedule  device
halcaps_add_kernel(capsule_predict              cpu       cpu)
halcaps_add_kernel(capsule_predict              naive     cuda)
halcaps_add_kernel(capsule_predict              tuned     cuda)
halcaps_add_kernel(capsule_predict              registers cuda)
halcaps_add_kernel(capsule_predict              staged    cuda)
# The best point of `halcaps explore` over schedules/spaces/capsule_predict_cpu.space,
# pasted from its best.txt (2026-11-21, MNIST b128, 2-core AMD EPYC with
# AVX-512: 7.64 ms against 7.99 ms for tile_i=16, i.e. `cpu`, within noise).
# Kept as a kernel so that the tests cover a schedule named by a space point.
halcaps_add_kernel(capsule_predict  "space:tile_i=32,vec_mult=1,stage_w=1"  cpu)
halcaps_add_kernel(capsule_predict_grad_input   cpu       cpu)
halcaps_add_kernel(capsule_predict_grad_input   naive     cuda)
halcaps_add_kernel(capsule_predict_grad_input   tuned     cuda)
halcaps_add_kernel(capsule_predict_grad_weight  cpu       cpu)
halcaps_add_kernel(capsule_predict_grad_weight  naive     cuda)
halcaps_add_kernel(capsule_predict_grad_weight  tuned     cuda)

# Squash, routing and the DigitCaps layer (generators/digitcaps.cpp,
# schedules/digitcaps_schedules.cpp). The routing iterations are unrolled at
# build time: 1, 3 (the paper's) and 5 are built; the runtime returns
# unsupported_iterations for others. stage_per_op is the eager-framework
# baseline for the fused forward, at 3 iterations only.
halcaps_add_kernel(squash                       cpu           cpu)
foreach (n IN ITEMS 1 3 5)
    halcaps_add_kernel(routing                  cpu           cpu ITERATIONS ${n})
    halcaps_add_kernel(digitcaps                cpu           cpu ITERATIONS ${n})
    halcaps_add_kernel(routing_backward         cpu           cpu ITERATIONS ${n})
    halcaps_add_kernel(digitcaps_backward       cpu           cpu ITERATIONS ${n})
endforeach ()
halcaps_add_kernel(routing                      stage_per_op  cpu ITERATIONS 3)
halcaps_add_kernel(digitcaps                    stage_per_op  cpu ITERATIONS 3)
# On the GPU so far only the eager-framework baseline: one kernel per stage.
halcaps_add_kernel(routing                      stage_per_kernel  cuda ITERATIONS 3)
halcaps_add_kernel(digitcaps                    stage_per_kernel  cuda ITERATIONS 3)
# Halide's autodiff of the forward (generators routing_backward_autodiff and
# digitcaps_backward_autodiff, scheduled by Li2018) is NOT built yet: measured
# 2026-11-21 it gave wrong gradients at B=32 (rel l2 error 0.41 against the
# float64 reference; 132 ms against the hand-derived backward's 68 ms) and
# out-of-bounds output writes at extents below the vector width (Li2018's
# ShiftInwards splits). To build it for investigation:
#   halcaps_add_kernel(routing_backward_autodiff autodiff cpu ITERATIONS 3 AUTOSCHEDULER Halide::Li2018)

# The capsule convolution with 4x4 poses (generators/capsconv.cpp,
# schedules/capsconv_schedules.cpp); stride and pad are run-time arguments.
# simple (one pose at a time, no register blocking) is the forward's
# comparison point only.
halcaps_add_kernel(capsconv                     cpu       cpu)
halcaps_add_kernel(capsconv                     simple    cpu)
halcaps_add_kernel(capsconv_grad_input          cpu       cpu)
halcaps_add_kernel(capsconv_grad_filter         cpu       cpu)

# Autoscheduled rows: the same generators scheduled by Halide's
# autoschedulers instead of by schedules/, each an ordinary implementation
# name (auto_<plugin>) that the runtime, the tests and `halcaps bench` pick up
# like any other. The plugins' parameters are in schedules/autoschedulers.h;
# schedules/autoschedule.h runs them and guards the tails they leave
# unguarded; the estimates they see are the generators' (MNIST b128;
# capsconv: n=8, 32x32, ci=co=32, 3x3). Compile (search) and run times:
# bench/results/barham-isard-*.md.
#   HALCAPS_AUTOSCHEDULED_KERNELS (ON): Mullapudi2016 and Li2018. Measured
#     2026-11-21 in a clean build on the 2-core build machine (ninja log):
#     their 10 libraries took 132 s of the 977 s that all kernel generator
#     runs took (2 at a time), i.e. about 1 minute of wall time, most of it
#     capsconv and DigitCaps (whose generators are slow without any
#     autoscheduler too); prediction's are 6-7 s a library (3 ISA levels).
#   HALCAPS_BEAM_SEARCH_KERNELS (OFF): Adams2019 (CPU) and Anderson2021
#     (CUDA), whose beam searches took, per generator run for ONE target,
#     29-31 s CPU (prediction), 109 s (grad_input, AVX2), 11-21 s
#     (Anderson2021, prediction and grad_input) on the same machine: tens of
#     minutes for all their libraries with three ISA levels, too slow for
#     every CI build. Build them with -DHALCAPS_BEAM_SEARCH_KERNELS=ON.
set(halcaps_cpu_autoschedulers "")
set(halcaps_cuda_autoschedulers "")
if (HALCAPS_AUTOSCHEDULED_KERNELS)
    list(APPEND halcaps_cpu_autoschedulers Mullapudi2016 Li2018)
endif ()
if (HALCAPS_BEAM_SEARCH_KERNELS)
    list(APPEND halcaps_cpu_autoschedulers Adams2019)
    list(APPEND halcaps_cuda_autoschedulers Anderson2021)
endif ()
foreach (device IN ITEMS cpu cuda)
    foreach (plugin IN LISTS halcaps_${device}_autoschedulers)
        string(TOLOWER "auto_${plugin}" name)
        foreach (generator IN ITEMS capsule_predict capsule_predict_grad_input capsule_predict_grad_weight capsconv)
            halcaps_add_kernel(${generator}     ${name}   ${device} PLUGIN Halide::${plugin})
        endforeach ()
        halcaps_add_kernel(digitcaps            ${name}   ${device} ITERATIONS 3 PLUGIN Halide::${plugin})
    endforeach ()
endforeach ()
