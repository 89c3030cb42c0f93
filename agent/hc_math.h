/*
 * agent/hc_math.h - the two functions of libm the profiler needs, log and
 * expm1, written out so that the library does not load libm: in a process
 * that does not use it, libm alone would be 250-320 KiB of resident pages
 * (the loader and the kernel's fault-around touch it).  Both are correct to
 * a few units in the last place over the arguments the profiler passes
 * (log: (0, 1] and beyond; expm1: any finite x), which tests/unit/hc_math.c
 * checks against libm.
 */
#ifndef HC_AGENT_MATH_H
#define HC_AGENT_MATH_H

#include <stdint.h>
#include <string.h>

/* x * 2^k, for k in [-2000, 2000]: the result may be 0 or subnormal. */
static inline double hc_scale2(double x, int k)
{
	while (k > 1023) {
		x *= 0x1p1023;
		k -= 1023;
	}
	while (k < -1022) {
		x *= 0x1p-1022;
		k += 1022;
	}
	uint64_t b = (uint64_t)(k + 1023) << 52;
	double f;
	memcpy(&f, &b, sizeof f);
	return x * f;
}

/* Natural logarithm.  log(0) = -inf, log(negative or NaN) = NaN. */
static inline double hc_log(double x)
{
	if (!(x > 0))
		return x == 0 ? -__builtin_inf() : __builtin_nan("");
	if (x == __builtin_inf())
		return x;
	int e = 0;
	if (x < 0x1p-1022) { /* subnormal: make it normal first */
		x *= 0x1p54;
		e = -54;
	}
	uint64_t b;
	memcpy(&b, &x, sizeof b);
	e += (int)((b >> 52) & 0x7ff) - 1023;
	b = (b & 0x000fffffffffffffull) | 0x3ff0000000000000ull; /* m in [1, 2) */
	double m;
	memcpy(&m, &b, sizeof m);
	if (m > 1.4142135623730951) { /* to [0.707, 1.414] */
		m *= 0.5;
		e++;
	}
	/* log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716 */
	double s = (m - 1) / (m + 1), s2 = s * s, term = s, sum = 0;
	for (int k = 1; k <= 41; k += 2) {
		sum += term / k;
		term *= s2;
	}
	const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
	return (double)e * ln2_hi + (2 * sum + (double)e * ln2_lo);
}

/* exp(x) - 1, accurate for small |x| too. */
static inline double hc_expm1(double x)
{
	if (x != x)
		return x;
	if (x < -40)
		return -1.0; /* exp(x) < 2^-57: below half an ulp of 1 */
	if (x > 709.78)
		return __builtin_inf();
	if (x > -1 && x < 1) { /* x (1 + x/2 (1 + x/3 (1 + ...))) */
		double p = 1;
		for (int k = 24; k >= 2; k--)
			p = 1 + x / k * p;
		return x * p;
	}
	/* exp(x) = 2^n exp(r), r = x - n ln2, |r| <= 0.35 */
	const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
	double nf = __builtin_floor(x * 1.44269504088896338700 + 0.5);
	double r = (x - nf * ln2_hi) - nf * ln2_lo;
	double term = 1, er = 0;
	for (int k = 1; k <= 22; k++) {
		er += term;
		term *= r / k;
	}
	return hc_scale2(er, (int)nf) - 1.0;
}

#endif
