/* proposal.c: the sample rank of the proposed boundary, shared by the CPU and CUDA backends.
 * Owns: the rule that makes an underfill (a second scan) rare at every k and sample size.
 * Must not: depend on the backend; it runs on the host, once per search call.
 */
#include <math.h>

#include "sieve_kernels_internal.h"

/* ln(x!) for x >= 0: summed below 16, Stirling's series above (error under 1e-12 there). */
static double log_factorial(double x) {
    if (x < 16.0) {
        double s = 0.0;
        for (double i = 2.0; i <= x; i += 1.0) s += log(i);
        return s;
    }
    const double pi = 3.14159265358979323846;
    return x * log(x) - x + 0.5 * log(2.0 * pi * x) + 1.0 / (12.0 * x) - 1.0 / (360.0 * x * x * x);
}

uint64_t sieve__boundary_rank(double r) {
    if (!(r > 0.0)) return 0;
    if (r > 1e15) return UINT64_MAX;
    const uint64_t before = (uint64_t)floor(1.25 * r + 3.0 * sqrt(r) + 2.0);
    const double lr = log(r), leps = log(SIEVE__UNDERFILL_P);
    /* from the first j with j + 2 > r, where the bound below holds */
    for (uint64_t j = (uint64_t)r;; j++) {
        const double x = (double)j + 1.0;
        /* P(Poisson(r) > j) = sum over i >= x of P(i) <= P(x) / (1 - r / (x + 1)): each term
           is at most r / (x + 1) times the one before it */
        const double lp = -r + x * lr - log_factorial(x);
        if (lp - log1p(-r / (x + 1.0)) <= leps) return j > before ? j : before;
    }
}
