/* test_progress.c: the progress line's text (count, percent, rate, ETA), and that nothing is
 * written when the bar is disabled. */
#include "helpers.h"

TestSuite(progress, .init = tmp_setup, .fini = tmp_teardown);

static void expect_line(const sieve_progress *p, uint64_t done, double t, const char *want) {
    char buf[256];
    size_t n = sieve_progress_format(p, done, t, buf, sizeof buf);
    cr_assert_str_eq(buf, want);
    EXPECT_U64(n, strlen(want));
}

Test(progress, line_text) {
    sieve_progress p;
    sieve_progress_init(&p, stderr, "ingest", "vectors", 8841823, 0, SIEVE_PROGRESS_NEVER);
    /* 2,758,492 in 12.8 s: 215.5k/s, 6,083,331 left -> 28 s */
    expect_line(&p, 2758492, 12.8,
                "ingest [#######.................]  31.2%  2,758,492/8,841,823 vectors  215.5k/s  "
                "ETA 0:28");
    expect_line(&p, 0, 0.0,
                "ingest [........................]   0.0%  0/8,841,823 vectors  0.0/s  ETA --:--");
    expect_line(&p, 8841823, 41.2,
                "ingest [########################] 100.0%  8,841,823/8,841,823 vectors  214.6k/s  "
                "done in 0:41");
    /* 1,000 per second with 3,723,000 left: an hour-long ETA */
    sieve_progress_init(&p, stderr, "", "", 3724000, 0, SIEVE_PROGRESS_NEVER);
    expect_line(&p, 1000, 1.0, "[........................]   0.0%  1,000/3,724,000  1.0k/s  ETA 1:02:03");
    /* resumed: the rate counts only this run's work */
    sieve_progress_init(&p, stderr, "x", "rows", 0, 1000000, SIEVE_PROGRESS_NEVER);
    expect_line(&p, 3500000, 2.0, "x 3,500,000 rows  1.25M/s  0:02");
    char small[10];
    EXPECT_U64(sieve_progress_format(&p, 3500000, 2.0, small, sizeof small), 9);
    cr_assert_str_eq(small, "x 3,500,0");
}

static size_t slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = 0;
    return n;
}

Test(progress, quiet_unless_enabled) {
    const char *path = tpath("err.txt");
    FILE *f = fopen(path, "w");
    sieve_progress p;
    sieve_progress_init(&p, f, "gen", "vectors", 100, 0, SIEVE_PROGRESS_AUTO); /* not a tty */
    cr_assert_eq(p.enabled, 0, "a regular file is not a terminal");
    sieve_progress_update(&p, 50);
    sieve_progress_finish(&p);
    sieve_progress_init(&p, f, "gen", "vectors", 100, 0, SIEVE_PROGRESS_NEVER);
    sieve_progress_update(&p, 50);
    sieve_progress_finish(&p);
    fclose(f);
    char buf[1024];
    EXPECT_U64(slurp(path, buf, sizeof buf), 0);

    f = fopen(path, "w");
    sieve_progress_init(&p, f, "gen", "vectors", 100, 0, SIEVE_PROGRESS_ALWAYS);
    sieve_progress_update(&p, 50); /* first update draws */
    sieve_progress_update(&p, 60); /* within 100 ms: no redraw */
    sieve_progress_finish(&p);     /* final line and newline */
    fclose(f);
    slurp(path, buf, sizeof buf);
    cr_assert_eq(buf[0], '\r', "line starts with a carriage return: %s", buf);
    cr_assert_not_null(strstr(buf, "gen [############............]  50.0%  50/100 vectors"), "%s", buf);
        /* two draws: the first update and finish (the second update came within 100 ms) */
    cr_assert_not_null(strstr(buf, "60/100 vectors"), "finish draws the last count: %s", buf);
    const char *second = strchr(buf + 1, '\r');
    cr_assert_not_null(second, "finish redraws: %s", buf);
    cr_assert_null(strchr(second + 1, '\r'), "drawn three times: %s", buf);
    cr_assert_eq(buf[strlen(buf) - 1], '\n');
}
