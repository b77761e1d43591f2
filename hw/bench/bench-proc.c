/*
 * The back-end's CPU time from /proc/PID/stat and its context switches
 * from every /proc/PID/task/TID/status (include/bench/bench-proc.h): a
 * sample that cannot be read is marked so and left out of the report
 * rather than failing the run, since the process is not the bench's.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include <glib.h>

#include "bench-proc.h"

static bool read_proc_stat(int pid, uint64_t *ut, uint64_t *st)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/stat", pid);
    g_autofree char *buf = NULL;
    unsigned long long u, s;
    char *p;

    if (!g_file_get_contents(path, &buf, NULL, NULL)) {
        return false;
    }
    /* comm may contain spaces: fields restart after the last ')' */
    p = strrchr(buf, ')');
    /* after ") " : state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &u, &s) != 2) {
        return false;
    }
    *ut = u;
    *st = s;
    return true;
}

static uint64_t status_field(const char *buf, const char *name)
{
    const char *l = strstr(buf, name);

    return l ? g_ascii_strtoull(l + strlen(name), NULL, 10) : 0;
}

static void read_task_csw(int pid, uint64_t *v, uint64_t *nv)
{
    g_autofree char *dpath = g_strdup_printf("/proc/%d/task", pid);
    DIR *d = opendir(dpath);
    struct dirent *de;

    *v = *nv = 0;
    if (!d) {
        return;
    }
    while ((de = readdir(d))) {
        g_autofree char *path = NULL;
        g_autofree char *buf = NULL;

        if (de->d_name[0] == '.') {
            continue;
        }
        path = g_strdup_printf("%s/%s/status", dpath, de->d_name);
        if (g_file_get_contents(path, &buf, NULL, NULL)) {
            *v += status_field(buf, "\nvoluntary_ctxt_switches:");
            *nv += status_field(buf, "\nnonvoluntary_ctxt_switches:");
        }
    }
    closedir(d);
}

void bench_proc_sample(int pid, struct bench_proc_sample *s)
{
    memset(s, 0, sizeof(*s));
    if (pid <= 0) {
        return;
    }
    s->ok = read_proc_stat(pid, &s->utime, &s->stime);
    read_task_csw(pid, &s->vcsw, &s->nvcsw);
}
