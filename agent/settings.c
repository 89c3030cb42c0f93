/*
 * agent/settings.c - the settings of shm/hc_settings.def, read and written
 * by number: configuration, mallctl and the control segment all come here.
 *
 * A setting's start-up value lives in hc_opt under its option name and its
 * run-time value in hc_prof under its segment field's name; both offsets,
 * and the hook a write runs, are generated from the list.  Values are read
 * and written with atomics of the field's width (the hot paths read them
 * without a lock); the one string, prof.prefix, under hc_prof_lock.
 *
 * Nothing here allocates or uses stdio: configuration runs inside the first
 * malloc.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "agent.h"

/* What a write of a run-time setting does beyond storing the value; a
 * setting without a hook is read where it is used. */
static void rate_changed(void)
{
	hc_prof_rate_changed();
}
static void timer_changed(void)
{
	if (__atomic_load_n(&hc_prof.timer_s, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&hc_prof.threshold, __ATOMIC_RELAXED))
		hc_dump_start_timer();
}

static void (*const hooks[HC_NSETTINGS])(void) = {
	[HC_SETTING_prof_active] = rate_changed,
	[HC_SETTING_lg_prof_sample] = rate_changed,
	[HC_SETTING_prof_timer_s] = timer_changed,
	[HC_SETTING_prof_threshold] = timer_changed,
};

#define NONE 0xffff
static const struct {
	uint16_t opt; /* offset in hc_opts_t            */
	uint16_t rt;  /* offset in hc_prof_state_t, or NONE */
} where[HC_NSETTINGS] = {
#define HC_OPTION(o, t, mn, mx, d, h) [HC_SETTING_##o] = { offsetof(hc_opts_t, o), NONE },
#define HC_RUNTIME(o, t, mn, mx, d, n, f, h) \
	[HC_SETTING_##o] = { offsetof(hc_opts_t, o), offsetof(hc_prof_state_t, f) },
#include "../shm/hc_settings.def"
#undef HC_OPTION
#undef HC_RUNTIME
};
_Static_assert(sizeof(hc_opts_t) < NONE && sizeof(hc_prof_state_t) < NONE, "offsets fit");

/* Strings fit the agent's fields. */
#define HC_OPTION(o, t, mn, mx, d, h)        _Static_assert(t != HC_SET_STR || mx < HC_PREFIX_MAX, #o " fits its field");
#define HC_RUNTIME(o, t, mn, mx, d, n, f, h) HC_OPTION(o, t, mn, mx, d, h)
#include "../shm/hc_settings.def"
#undef HC_OPTION
#undef HC_RUNTIME

/* A word setting's field holds the word's number (hc_shm_words): the
 * unwinder's enum and thp's HC_THP_* are in the order of the words. */
_Static_assert(sizeof(hc_unwinder_t) == sizeof(unsigned), "a word's field is an unsigned");
_Static_assert(HC_UNWIND_LIBGCC == 2 && HC_THP_NEVER == 2, "three words each");

/* Load a field of type t at p. */
static void load(hc_set_type_t t, const void *p, hc_shm_value_t *v, char *buf, size_t len)
{
	memset(v, 0, sizeof *v);
	switch (t) {
	case HC_SET_BOOL: v->b = __atomic_load_n((const bool *)p, __ATOMIC_RELAXED); return;
	case HC_SET_UINT:
	case HC_SET_LG: v->u = __atomic_load_n((const unsigned *)p, __ATOMIC_RELAXED); return;
	case HC_SET_SSIZE: v->i = __atomic_load_n((const long *)p, __ATOMIC_RELAXED); return;
	case HC_SET_BYTES: v->u = __atomic_load_n((const uint64_t *)p, __ATOMIC_RELAXED); return;
	case HC_SET_POW2: {
		int lg = __atomic_load_n((const int *)p, __ATOMIC_RELAXED);
		v->u = lg < 0 ? UINT64_MAX : (uint64_t)lg;
		return;
	}
	case HC_SET_STR:
		if (buf) {
			hc_shm_strlcpy(buf, p, len);
			v->s = buf;
		} else {
			v->s = p;
		}
		return;
	case HC_SET_UNWIND:
	case HC_SET_THP: /* the word's number, as unsigned */
		v->s = hc_shm_words(t)[__atomic_load_n((const unsigned *)p, __ATOMIC_RELAXED)];
		return;
	}
}

/* Store v (already checked) into a field of type t at p. */
static void store(hc_set_type_t t, void *p, const hc_shm_value_t *v)
{
	int w;
	switch (t) {
	case HC_SET_BOOL: __atomic_store_n((bool *)p, v->b, __ATOMIC_RELAXED); return;
	case HC_SET_UINT:
	case HC_SET_LG: __atomic_store_n((unsigned *)p, (unsigned)v->u, __ATOMIC_RELAXED); return;
	case HC_SET_SSIZE: __atomic_store_n((long *)p, (long)v->i, __ATOMIC_RELAXED); return;
	case HC_SET_BYTES: __atomic_store_n((uint64_t *)p, v->u, __ATOMIC_RELAXED); return;
	case HC_SET_POW2: __atomic_store_n((int *)p, v->u == UINT64_MAX ? -1 : (int)v->u, __ATOMIC_RELAXED); return;
	case HC_SET_STR: hc_shm_strlcpy(p, v->s, HC_PREFIX_MAX); return;
	case HC_SET_UNWIND:
	case HC_SET_THP:
		if ((w = hc_shm_word_index(t, v->s)) >= 0)
			__atomic_store_n((unsigned *)p, (unsigned)w, __ATOMIC_RELAXED);
		return;
	}
}

void hc_setting_configure(unsigned i, const hc_shm_value_t *v)
{
	store(hc_shm_settings[i].type, (char *)&hc_opt + where[i].opt, v);
}

void hc_setting_option(unsigned i, hc_shm_value_t *v)
{
	load(hc_shm_settings[i].type, (const char *)&hc_opt + where[i].opt, v, NULL, 0);
}

void hc_setting_get(unsigned i, hc_shm_value_t *v, char *buf, size_t len)
{
	const hc_shm_setting_t *s = &hc_shm_settings[i];
	const char *p = (const char *)&hc_prof + where[i].rt;
	if (s->type != HC_SET_STR) {
		load(s->type, p, v, NULL, 0);
		return;
	}
	hc_mutex_lock(&hc_prof_lock);
	load(s->type, p, v, buf, len);
	hc_mutex_unlock(&hc_prof_lock);
}

int hc_setting_set(unsigned i, const hc_shm_value_t *v)
{
	const hc_shm_setting_t *s = &hc_shm_settings[i];
	char why[8];
	if (i >= HC_NSETTINGS || where[i].rt == NONE || !hc_shm_setting_check(s, v, why, sizeof why))
		return EINVAL;
	char *p = (char *)&hc_prof + where[i].rt;
	if (s->type == HC_SET_STR) {
		hc_mutex_lock(&hc_prof_lock);
		store(s->type, p, v);
		hc_mutex_unlock(&hc_prof_lock);
	} else {
		store(s->type, p, v);
	}
	if (hooks[i])
		hooks[i]();
	return 0;
}

void hc_settings_start(void)
{
	for (unsigned i = 0; i < HC_NSETTINGS; i++) {
		if (where[i].rt == NONE)
			continue;
		hc_shm_value_t v;
		hc_setting_option(i, &v);
		store(hc_shm_settings[i].type, (char *)&hc_prof + where[i].rt, &v);
	}
}
