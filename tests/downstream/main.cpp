// Runs capsule prediction through the installed library and checks one
// output element by hand; exits non-zero on any failure.
#include <cmath>
#include <cstdio>
#include <vector>

#include <halcaps/halcaps.h>

int main() {
    const int B = 2, I = 3, K = 4, J = 5, E = 6;
    std::vector<float> u(B * I * K), W(I * J * E * K), u_hat(B * I * J * E, NAN);
    for (size_t n = 0; n < u.size(); n++) u[n] = 0.25f * float(n % 7) - 0.5f;
    for (size_t n = 0; n < W.size(); n++) W[n] = 0.125f * float(n % 5) + 0.1f;

    halcaps::TensorView u_view{u.data(), {B, I, K}};
    halcaps::TensorView W_view{W.data(), {I, J, E, K}};
    halcaps::TensorView u_hat_view{u_hat.data(), {B, I, J, E}};
    halcaps::Status status = halcaps::predict(u_view, W_view, u_hat_view);
    if (!status.ok()) {
        std::printf("predict failed: %s\n", status.message.c_str());
        return 1;
    }
    // u_hat[1, 2, 3, 4] = sum_k W[2, 3, 4, k] * u[1, 2, k]
    double expected = 0;
    for (int k = 0; k < K; k++) expected += double(W[((2 * J + 3) * E + 4) * K + k]) * double(u[(1 * I + 2) * K + k]);
    const double got = u_hat[((1 * I + 2) * J + 3) * E + 4];
    if (std::fabs(got - expected) > 1e-5) {
        std::printf("wrong result: got %g, expected %g\n", got, expected);
        return 1;
    }
    // A bad argument comes back as a status, not a crash.
    u_view.shape[2] = 5;
    status = halcaps::predict(u_view, W_view, u_hat_view);
    if (status.code != halcaps::StatusCode::extent_mismatch) {
        std::printf("expected extent_mismatch, got %s\n", halcaps::status_code_name(status.code));
        return 1;
    }
    std::printf("downstream: ok (u_hat[1,2,3,4] = %g; bad input gave: %s)\n", got, status.message.c_str());
    return 0;
}
