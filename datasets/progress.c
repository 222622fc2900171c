/* progress.c: a one-line terminal progress bar (count, percent, rate, ETA). Must not: write
 * anything when disabled (pipes and logs stay clean) or redraw more than ten times a second. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ds_internal.h"

#define BAR_WIDTH 24
#define REDRAW_S 0.1

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void sieve_progress_init(sieve_progress *p, FILE *out, const char *label, const char *unit,
                         uint64_t total, uint64_t base, sieve_progress_mode mode) {
    memset(p, 0, sizeof *p);
    p->out = out ? out : stderr;
    snprintf(p->label, sizeof p->label, "%s", label ? label : "");
    snprintf(p->unit, sizeof p->unit, "%s", unit ? unit : "");
    p->total = total;
    p->base = base;
    p->done = base;
    p->t_start = now_s();
    p->t_drawn = -1.0;
    if (mode == SIEVE_PROGRESS_ALWAYS) p->enabled = 1;
    else if (mode == SIEVE_PROGRESS_NEVER) p->enabled = 0;
    else p->enabled = isatty(fileno(p->out));
}

/* "1:02:03" or "2:03". */
static void fmt_time(char *b, size_t n, double s) {
    if (s < 0) s = 0;
    unsigned long t = (unsigned long)(s + 0.5);
    if (t >= 3600) snprintf(b, n, "%lu:%02lu:%02lu", t / 3600, (t / 60) % 60, t % 60);
    else snprintf(b, n, "%lu:%02lu", t / 60, t % 60);
}

static void fmt_rate(char *b, size_t n, double r) {
    if (r >= 1e6) snprintf(b, n, "%.2fM/s", r / 1e6);
    else if (r >= 1e3) snprintf(b, n, "%.1fk/s", r / 1e3);
    else snprintf(b, n, "%.1f/s", r);
}

size_t sieve_progress_format(const sieve_progress *p, uint64_t done, double elapsed_s,
                             char *buf, size_t len) {
    if (!buf || len == 0) return 0;
    char cnt[32], tot[32], rate[32], tm[32];
    size_t o = 0;
#define PUT(...)                                                                  \
    do {                                                                          \
        int k_ = snprintf(buf + o, o < len ? len - o : 0, __VA_ARGS__);           \
        if (k_ > 0) o += (size_t)k_;                                              \
    } while (0)
    if (p->label[0]) PUT("%s ", p->label);
    const uint64_t this_run = done > p->base ? done - p->base : 0;
    const double r = elapsed_s > 0 ? (double)this_run / elapsed_s : 0.0;
    if (p->total) {
        double frac = done >= p->total ? 1.0 : (double)done / (double)p->total;
        int fill = (int)(frac * BAR_WIDTH);
        char bar[BAR_WIDTH + 1];
        for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < fill ? '#' : '.';
        bar[BAR_WIDTH] = 0;
        PUT("[%s] %5.1f%%  %s/%s", bar, frac * 100.0, sieve__ds_group(done, cnt),
            sieve__ds_group(p->total, tot));
    } else {
        PUT("%s", sieve__ds_group(done, cnt));
    }
    if (p->unit[0]) PUT(" %s", p->unit);
    fmt_rate(rate, sizeof rate, r);
    PUT("  %s", rate);
    if (p->total && done >= p->total) {
        fmt_time(tm, sizeof tm, elapsed_s);
        PUT("  done in %s", tm);
    } else if (p->total) {
        if (r > 0) {
            fmt_time(tm, sizeof tm, (double)(p->total - done) / r);
            PUT("  ETA %s", tm);
        } else {
            PUT("  ETA --:--");
        }
    } else {
        fmt_time(tm, sizeof tm, elapsed_s);
        PUT("  %s", tm);
    }
#undef PUT
    if (o >= len) o = len - 1;
    return o;
}

static void draw(sieve_progress *p, double t) {
    char line[256];
    size_t n = sieve_progress_format(p, p->done, t - p->t_start, line, sizeof line);
    /* Carriage return, the line, then blank whatever a longer previous line left. */
    fprintf(p->out, "\r%s", line);
    if (p->last_len > n) fprintf(p->out, "%*s", (int)(p->last_len - n), "");
    fflush(p->out);
    p->last_len = n;
    p->t_drawn = t;
}

void sieve_progress_update(sieve_progress *p, uint64_t done) {
    p->done = done;
    if (!p->enabled) return;
    double t = now_s();
    if (p->t_drawn >= 0 && t - p->t_drawn < REDRAW_S) return;
    draw(p, t);
}

void sieve_progress_finish(sieve_progress *p) {
    if (!p->enabled) return;
    draw(p, now_s());
    fputc('\n', p->out);
    fflush(p->out);
}
