/*
 * heapctl/diagnose/diagnose.h - the diagnosis engine `heapctl doctor` and
 * `heapctl systemd` share: why a process is or is not reachable, as
 * findings (doctor.c); `heapctl doctor` itself is command.c.
 */
#ifndef HC_DIAGNOSE_H
#define HC_DIAGNOSE_H

#include "cli/cli.h"
#include "cli/json.h"

enum { CLI_OK, CLI_NOTE, CLI_PROBLEM };
#define CLI_DIAG_MAX 16
typedef struct cli_finding_s {
	int level;      /* CLI_OK, CLI_NOTE, CLI_PROBLEM             */
	int code;       /* HC_EXIT_* of a problem                    */
	char topic[16]; /* process, library, segment, control, ...   */
	char text[1024];
	char fix[1024];
} cli_finding_t;
typedef struct cli_diag_s {
	int pid;
	int code; /* the first problem's, 0 if none            */
	int n;
	cli_finding_t f[CLI_DIAG_MAX];
} cli_diag_t;
void cli_diagnose(int pid, uint64_t timeout_ns, cli_diag_t *d);
void cli_diag_print(const cli_diag_t *d, bool json, const char *indent);
void cli_diag_json(json_t *j, const cli_diag_t *d); /* pid, ok, exit, findings */
void cli_diag_json_findings(json_t *j, const cli_diag_t *d);
bool cli_diag_answers(const cli_diag_t *d);    /* its control thread answered */
const char *cli_diag_why(const cli_diag_t *d); /* the first problem (or note) */

/* command.c: heapctl doctor PID|UNIT */
int cmd_doctor(cli_args_t *a);
extern const cli_help_t cmd_help_doctor;

#endif
