# Every (operator, schedule, device) combination built into its own AOT
# library. The schedule names are those of capsule_prediction_schedules.cpp.
# Adding a line here makes the kernel callable through the runtime by name.

#                 generator                     schedule  device
halcaps_add_kernel(capsule_predict              cpu       cpu)
halcaps_add_kernel(capsule_predict              naive     cuda)
halcaps_add_kernel(capsule_predict              tuned     cuda)
halcaps_add_kernel(capsule_predict              staged    cuda)
halcaps_add_kernel(capsule_predict_grad_input   cpu       cpu)
halcaps_add_kernel(capsule_predict_grad_input   naive     cuda)
halcaps_add_kernel(capsule_predict_grad_input   tuned     cuda)
halcaps_add_kernel(capsule_predict_grad_weight  cpu       cpu)
halcaps_add_kernel(capsule_predict_grad_weight  naive     cuda)
halcaps_add_kernel(capsule_predict_grad_weight  tuned     cuda)
