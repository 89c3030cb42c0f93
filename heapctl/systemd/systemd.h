/*
 * heapctl/systemd/systemd.h - `heapctl systemd enable|disable|status`: its
 * entry point and help for the table in cli/main.c.
 */
#ifndef HC_SYSTEMD_H
#define HC_SYSTEMD_H

#include "cli/cli.h"

int cmd_systemd(cli_args_t *a);
extern const cli_help_t cmd_help_systemd;

#endif
