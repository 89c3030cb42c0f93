/*
 * hc_math.c - the profiler's own log and expm1 (agent/hc_math.h) against
 * libm's, over the arguments the profiler passes (uniform draws in (0, 1],
 * sample ratios from -1e6 to 0) and the edge cases.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "../lib/check.h"
#include "../../agent/hc_math.h"

/* Distance in units of the last place of want. */
static double ulps(double got, double want)
{
	if (got == want)
		return 0;
	double u = nextafter(fabs(want), INFINITY) - fabs(want);
	return fabs(got - want) / u;
}

int main(void)
{
	uint64_t s = 0x9e3779b97f4a7c15ull;
	double worst_log = 0, worst_expm1 = 0;
	for (int i = 0; i < 2000000; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		/* the sampler's draw: 53 random bits, never 0 */
		double u = (double)((s >> 11) + 1) * (1.0 / 9007199254740993.0);
		double d = ulps(hc_log(u), log(u));
		if (d > worst_log)
			worst_log = d;
		/* dump.c and prof.c pass -size/period: any ratio down to -1e6 */
		double x = -(double)(s >> 11) / 9007199254740992.0 * (i & 1 ? 1e6 : 2.0);
		d = ulps(hc_expm1(x), expm1(x));
		if (d > worst_expm1)
			worst_expm1 = d;
	}
	CHECK(worst_log <= 4, "hc_log is %.1f ulps from log", worst_log);
	CHECK(worst_expm1 <= 4, "hc_expm1 is %.1f ulps from expm1", worst_expm1);
	double big[] = { 1e-300, 4.9e-324, 2.2250738585072014e-308, 0.5, 1, 2, 10, 1e300, 1.7976931348623157e308 };
	for (unsigned i = 0; i < sizeof big / sizeof *big; i++)
		CHECK(ulps(hc_log(big[i]), log(big[i])) <= 4, "hc_log(%g) = %.17g, log = %.17g", big[i], hc_log(big[i]),
		    log(big[i]));
	double ex[] = { -1e-300, -1e-10, -0.49999, -0.5, -0.50001, -1, -20, -36, -39.9, -40, -745, -1e308, 1e-10, 0.4,
		0.7, 5, 700 };
	for (unsigned i = 0; i < sizeof ex / sizeof *ex; i++)
		CHECK(ulps(hc_expm1(ex[i]), expm1(ex[i])) <= 4, "hc_expm1(%g) = %.17g, expm1 = %.17g", ex[i],
		    hc_expm1(ex[i]), expm1(ex[i]));
	CHECK(hc_log(0) == -INFINITY && isnan(hc_log(-1)) && isnan(hc_log(NAN)), "log edge cases");
	CHECK(hc_log(INFINITY) == INFINITY, "log(inf)");
	CHECK(hc_expm1(0) == 0 && hc_expm1(-INFINITY) == -1 && isnan(hc_expm1(NAN)), "expm1 edge cases");
	CHECK(hc_expm1(800) == INFINITY, "expm1(800)");
	printf("hc_math: log worst %.2f ulps, expm1 worst %.2f ulps\n", worst_log, worst_expm1);
	return hc_check_finish("hc_math");
}
