# Every (operator, schedule, device) combination built into its own AOT
# library. The schedule names are those of predict_schedules.cpp.
# Adding a line here makes the kernel callable through the runtime by name.

#                 generator                     schedule  device
halcaps_add_kernel(predict              cpu       cpu)
halcaps_add_kernel(predict              naive     cuda)
halcaps_add_kernel(predict              tuned     cuda)
halcaps_add_kernel(predict              batch_vectors cuda)
# batch_walk: the hand-written forward's design (H200, MNIST b128 38.0 us,
# batch_vectors 47.3); batch_rows: the same with a block over a capsule's
# whole (e, j) row (36.6 us against 38.0 in one run). Where capsule_runs'
# fast path does not apply, the CUDA default is batch_rows, then batch_walk,
# where theirs do.
halcaps_add_kernel(predict              batch_walk cuda)
halcaps_add_kernel(predict              batch_rows cuda)
# capsule_runs: a block over 2 capsules and half the batch, so that the grid
# writes u_hat close to address order (H200, MNIST b128 34.1 us, b512 109.4,
# batch_rows 36.3 / 132.3); the CUDA default where its fast path applies and
# it was measured faster (capsule_runs_fits, runtime/src/predict.cpp).
halcaps_add_kernel(predict              capsule_runs cuda)
halcaps_add_kernel(predict_grad_input   cpu       cpu)
halcaps_add_kernel(predict_grad_input   naive     cuda)
halcaps_add_kernel(predict_grad_input   tuned     cuda)
halcaps_add_kernel(predict_grad_weight  cpu       cpu)
halcaps_add_kernel(predict_grad_weight  naive     cuda)
halcaps_add_kernel(predict_grad_weight  tuned     cuda)
# 16-byte loads of g, u and W's staged slice; the CUDA default for
# predict_backward where their fast path applies (runtime/src/predict.cpp).
halcaps_add_kernel(predict_grad_input   vectors   cuda)
halcaps_add_kernel(predict_grad_weight  vectors   cuda)
# Both gradients as one pipeline (schedules/predict_backward_schedules.cpp):
# one kernel reads g once for both (H200, MNIST b128: 117.9 us, slower than
# vectors' 95.9, so not the default). fused_cpu only checks the algorithm on
# machines without a GPU.
halcaps_add_kernel(predict_backward     fused_cpu cpu)
halcaps_add_kernel(predict_backward     fused     cuda)

# Squash, routing and the DigitCaps layer (generators/digitcaps.cpp,
# schedules/digitcaps_schedules.cpp). The routing iterations are unrolled at
# build time: 1, 3 (the paper's) and 5 are built; other counts run the
# routing_step_* kernels below. stage_per_op is the eager-framework
# baseline for the fused forward, at 3 iterations only.
halcaps_add_kernel(squash                       cpu           cpu)
halcaps_add_kernel(squash                       rows          cuda)
foreach (n IN ITEMS 1 3 5)
    halcaps_add_kernel(routing                  cpu           cpu ITERATIONS ${n})
    halcaps_add_kernel(digitcaps                cpu           cpu ITERATIONS ${n})
    halcaps_add_kernel(routing_backward         cpu           cpu ITERATIONS ${n})
    halcaps_add_kernel(digitcaps_backward       cpu           cpu ITERATIONS ${n})
endforeach ()
halcaps_add_kernel(routing                      stage_per_op  cpu ITERATIONS 3)
# One routing iteration each (generators routing_step_*): the general path
# for any iteration count and shape, chained by the runtime
# (runtime/src/routing_steps.cpp, implementation "steps"; on the CPU "cpu"
# runs it for the counts it has no unrolled kernel for). On the GPU one
# kernel per stage (stage_per_kernel), for CUDA and OpenCL.
foreach (step IN ITEMS routing_step_s routing_step_logits routing_step_backward routing_step_backward_last
                       routing_step_grad_b0)
    halcaps_add_kernel(${step}                  cpu           cpu)
    halcaps_add_kernel(${step}                  stage_per_kernel cuda)
endforeach ()
halcaps_add_kernel(digitcaps                    stage_per_op  cpu ITERATIONS 3)
# On the GPU so far only the eager-framework baseline: one kernel per stage.
halcaps_add_kernel(routing                      stage_per_kernel  cuda ITERATIONS 3)
halcaps_add_kernel(digitcaps                    stage_per_kernel  cuda ITERATIONS 3)
# The fused layer (generator digitcaps_fused, schedules/digitcaps_fused_schedules.cpp):
# u_hat recomputed in each pass, never stored. `fused` (two kernels per
# iteration) is the CUDA default for the layer at 1 and 5 iterations and for
# shapes fused_split_all_vectors refuses; fused_chunk8 at 3 only, for timing;
# fused_cpu only checks the algorithm on machines without a GPU.
foreach (n IN ITEMS 1 3 5)
    halcaps_add_kernel(digitcaps_fused          fused             cuda ITERATIONS ${n})
endforeach ()
# fused_split_all_vectors: a logits kernel and a partial-sum kernel a pass,
# both over batch vectors; CapsNet's in_dim 8 and out_dim 16 only (the
# runtime refuses other shapes and the default then runs fused); the CUDA
# default where it applies (out_caps up to 24), 4.8x faster than fused on
# an H200.
halcaps_add_kernel(digitcaps_fused              fused_split_all_vectors cuda ITERATIONS 3)
# fused_chunk8: the best point of digitcaps_fused_cuda.space found by
# `halcaps explore` (H200, MNIST b128: 721.8 us against fused's 773.2 in one
# bench run); fused stays the default (ahead at b512).
halcaps_add_kernel(digitcaps_fused              fused_chunk8      cuda ITERATIONS 3)
halcaps_add_kernel(digitcaps_fused              fused_cpu         cpu  ITERATIONS 3)
# cpu_lanes: every stage of a pass vectorised across input capsules, the
# first pass as one matrix product (first_pass_as_gemm); the layer's CPU
# default at 3 iterations.
halcaps_add_kernel(digitcaps_fused              cpu_lanes         cpu  ITERATIONS 3 PARAMS first_pass_as_gemm=true)
# Routing alone in the same passes (generator routing_fused): u_hat read once
# per iteration; the CUDA default for route.
foreach (n IN ITEMS 1 3 5)
    halcaps_add_kernel(routing_fused            fused             cuda ITERATIONS ${n})
endforeach ()
halcaps_add_kernel(routing_fused                fused_cpu         cpu  ITERATIONS 3)
# The GPU backward, one kernel per stage (the baseline for a fused one), at 1
# and 3 iterations: at 5 its ~200 kernels took 134 s (routing) and 151 s (layer)
# to generate on the 2-core CI machine, more than the rest of this file.
foreach (n IN ITEMS 1 3)
    halcaps_add_kernel(routing_backward         stage_per_kernel  cuda ITERATIONS ${n})
    halcaps_add_kernel(digitcaps_backward       stage_per_kernel  cuda ITERATIONS ${n})
endforeach ()
# rows_predict: the capsule prediction's tuned schedules for u_hat, grad_u
# and grad_W; every other stage over rows of its two innermost dimensions
# fused, u_hat's rows read as 16-byte vectors when E == 16 (H200, MNIST
# b128: 740.2 us; wide b32: 1439.5, the fastest there); the layer
# backward's CUDA default at 3 iterations when grad_u is off a 16-byte
# boundary.
halcaps_add_kernel(digitcaps_backward           rows_predict      cuda ITERATIONS 3)
# rows_vectors: rows_predict with the prediction's `vectors` gradient kernels
# (16-byte loads of grad_u_hat; grad_u and grad_W must start on a 16-byte
# boundary), u_hat by the prediction's batch_walk kernel and the logits
# inlined; the layer backward's CUDA default at 3 iterations (H200, MNIST
# b128: 628.0 us, rows_predict 728.7 in an earlier run).
halcaps_add_kernel(digitcaps_backward           rows_vectors      cuda ITERATIONS 3)
# Training's pair (runtime: digitcaps_with_s, digitcaps_backward_with_s): the
# fused forward that also returns every iteration's s, and the layer backward
# that starts from them instead of summing them again (generators
# digitcaps_fused_with_s and digitcaps_backward_with_s). CPU at 1, 3 and 5
# iterations; CUDA at 3, with the same schedules as the defaults of
# digitcaps and digitcaps_backward and their fallbacks. On the CPU the
# forward's default is cpu_lanes.
foreach (n IN ITEMS 1 3 5)
    halcaps_add_kernel(digitcaps_fused_with_s   fused_cpu         cpu  ITERATIONS ${n})
    halcaps_add_kernel(digitcaps_fused_with_s   cpu_lanes         cpu  ITERATIONS ${n} PARAMS first_pass_as_gemm=true)
    halcaps_add_kernel(digitcaps_backward_with_s cpu              cpu  ITERATIONS ${n})
endforeach ()
# The training pair's backward in three phases that store nothing of
# B·I·J·E floats (generator digitcaps_backward_with_s_phases,
# schedules/digitcaps_training_schedules.cpp). At 1 and 3 iterations: at 5
# its generator run takes 44 s of a core per CPU target (cpu's 9 s), and the
# table's cpu runs there.
foreach (n IN ITEMS 1 3)
    halcaps_add_kernel(digitcaps_backward_with_s_phases cpu_phases cpu ITERATIONS ${n})
endforeach ()
halcaps_add_kernel(digitcaps_fused_with_s       fused_split_all_vectors cuda ITERATIONS 3)
halcaps_add_kernel(digitcaps_fused_with_s       fused             cuda ITERATIONS 3)
halcaps_add_kernel(digitcaps_backward_with_s    rows_vectors      cuda ITERATIONS 3)
halcaps_add_kernel(digitcaps_backward_with_s    rows_predict      cuda ITERATIONS 3)
# Halide's autodiff of the forward (generators routing_backward_autodiff and
# digitcaps_backward_autodiff): its wrong gradients were a modelling bug, now
# fixed (generators/digitcaps.cpp, above the autodiff generators). Built with
# root_autodiff (every stage compute_root, serial) at 3 iterations, as a second
# backward the tests check against the reference and the hand-derived one.
halcaps_add_kernel(routing_backward_autodiff    root_autodiff cpu ITERATIONS 3)
halcaps_add_kernel(digitcaps_backward_autodiff  root_autodiff cpu ITERATIONS 3)
# Scheduled by Li2018 it is still NOT built: it writes outputs out of bounds
# at extents below its tile sizes (Li2018's ShiftInwards splits; seen at
# B=2 I=5 J=3 E=4); its gradients are right at B=32 I=64
# J=E=16 (3e-7). 132 ms against the hand-derived backward's 68 ms at B=32,
# MNIST otherwise. To build it for investigation:
#   halcaps_add_kernel(routing_backward_autodiff autodiff cpu ITERATIONS 3 AUTOSCHEDULER Halide::Li2018)

# The capsule convolution with 4x4 poses (generators/capsconv.cpp,
# schedules/capsconv_schedules.cpp); stride and pad are run-time arguments.
halcaps_add_kernel(capsconv                     cpu       cpu)
halcaps_add_kernel(capsconv                     cpu_co4   cpu)
halcaps_add_kernel(capsconv_grad_input          cpu       cpu)
halcaps_add_kernel(capsconv_grad_filter         cpu       cpu)
# On CUDA (H200 times in the schedules' comments): vaidya
# (a thread per output pixel, Vaidya's decomposition), staged_rows (the
# default outside the Winograd form), tuned (a thread per pose row) and
# tuned_co4 (4 capsule types a thread), the default's fallbacks where
# staged_rows' tiles do not fit; the gradients have `tuned` and `tuned_caps`
# (the same grad_input, a faster grad_filter: capsconv_backward's CUDA
# default).
halcaps_add_kernel(capsconv                     vaidya     cuda)
halcaps_add_kernel(capsconv                     tuned      cuda)
halcaps_add_kernel(capsconv                     tuned_co4  cuda)
halcaps_add_kernel(capsconv                     staged_rows cuda)
halcaps_add_kernel(capsconv_grad_input          tuned      cuda)
halcaps_add_kernel(capsconv_grad_filter         tuned      cuda)
halcaps_add_kernel(capsconv_grad_input          tuned_caps cuda)
halcaps_add_kernel(capsconv_grad_filter         tuned_caps cuda)
# The Winograd forms of the forward for 3x3 filters at stride 1
# (generators/capsconv_winograd.cpp, schedules/capsconv_winograd_schedules.cpp):
# F(2x2, 3x3) and F(4x4, 3x3); the runtime names them winograd2x2_<schedule>
# and winograd4x4_<schedule> and returns unsupported_shape for other filters
# and strides. On CUDA F(4x4) only: its `staged` is the default for 3x3
# filters at stride 1.
foreach (form IN ITEMS winograd2x2 winograd4x4)
    halcaps_add_kernel(capsconv_${form}         cpu        cpu)
endforeach ()
halcaps_add_kernel(capsconv_winograd4x4         staged     cuda)

# Autoscheduled rows: the same generators scheduled by Halide's
# autoschedulers instead of by schedules/, each an ordinary implementation
# name (auto_<plugin>) that the runtime, the tests and `halcaps bench` pick up
# like any other. The plugins' parameters are in schedules/autoschedulers.h;
# schedules/autoschedule.h runs them and guards the tails they leave
# unguarded; the estimates they see are the generators' (MNIST b128;
# capsconv: n=8, 32x32, ci=co=32, 3x3). Compile (search) and run times:
# docs/history.md: barham-isard-cpu, nvidia-h200-barham-isard.
#   HALCAPS_AUTOSCHEDULED_KERNELS (ON): Mullapudi2016 and Li2018. Measured
#     in a clean build on the 2-core build machine (ninja log):
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
        foreach (generator IN ITEMS predict predict_grad_input predict_grad_weight capsconv)
            halcaps_add_kernel(${generator}     ${name}   ${device} PLUGIN Halide::${plugin})
        endforeach ()
        halcaps_add_kernel(digitcaps            ${name}   ${device} ITERATIONS 3 PLUGIN Halide::${plugin})
    endforeach ()
endforeach ()
