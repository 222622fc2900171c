/* test_datagen.c: sieve-datagen run as a program: files it writes read back with the right
 * shape and are identical whatever the thread count; --check accepts good files and names the
 * problem in bad ones; usage errors exit 2; no progress bar when stderr is not a terminal. */
#include "helpers.h"

#include <sys/wait.h>

TestSuite(datagen, .init = tmp_setup, .fini = tmp_teardown);

/* Runs sieve-datagen with args; stdout and stderr go to files in the test directory.
 * Returns the exit status. */
static int datagen(const char *args) {
    const char *bd = getenv("SIEVE_BUILD_DIR");
    char self[1024];
    if (!bd) { /* run by hand: the build directory is the parent of this binary's folder */
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        cr_assert_gt(n, 0, "SIEVE_BUILD_DIR is not set and /proc/self/exe is unreadable");
        self[n] = 0;
        for (int up = 0; up < 2; up++) *strrchr(self, '/') = 0;
        bd = self;
    }
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s/datasets/sieve-datagen' %s >out.txt 2>err.txt", g_dir,
             bd, args);
    int st = system(cmd);
    cr_assert(WIFEXITED(st), "sieve-datagen did not exit normally: %s", cmd);
    return WEXITSTATUS(st);
}

static char *slurp(const char *name) {
    static char buf[8192];
    FILE *f = fopen(tpath(name), "rb");
    if (!f) return strcpy(buf, "");
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

static int same_bytes(const char *a, const char *b) {
    FILE *fa = fopen(tpath(a), "rb"), *fb = fopen(tpath(b), "rb");
    cr_assert(fa && fb, "cannot open %s or %s", a, b);
    int same = 1, ca, cb;
    do {
        ca = fgetc(fa);
        cb = fgetc(fb);
        if (ca != cb) same = 0;
    } while (same && ca != EOF);
    fclose(fa);
    fclose(fb);
    return same;
}

Test(datagen, help_and_usage_errors) {
    cr_assert_eq(datagen("--help"), 0);
    cr_assert_not_null(strstr(slurp("out.txt"), "usage: sieve-datagen --kind KIND"));
    cr_assert_eq(datagen("--kind gaussian --count 10"), 2);
    cr_assert_not_null(strstr(slurp("err.txt"), "--out FILE is required"), "%s", slurp("err.txt"));
    cr_assert_eq(datagen("--kind nope --count 10 --out x.fbin"), 2);
    cr_assert_not_null(strstr(slurp("err.txt"), "--kind nope: expected gaussian, clustered"));
    cr_assert_eq(datagen("--kind gaussian --count 0 --out x.fbin"), 2);
    cr_assert_not_null(strstr(slurp("err.txt"), "--count 0: expected a positive integer"));
    cr_assert_eq(datagen("--kind gaussian --count 5 --out x.txt"), 2);
    cr_assert_not_null(strstr(slurp("err.txt"), "x.txt: cannot write vectors in this format"));
    cr_assert_eq(datagen("--kind msmarco --count 8841824 --out x.fbin"), 2);
    cr_assert_not_null(strstr(slurp("err.txt"), "at most 8841823 passages"));
    cr_assert_eq(datagen("--bogus"), 2);
    cr_assert(!file_exists(tpath("x.fbin")));
}

Test(datagen, writes_deterministic_files_with_queries) {
    cr_assert_eq(datagen("--kind clustered --count 3000 --dim 48 --clusters 10 --seed 3 "
                         "--out a.fbin --queries 7 --queries-out q.npy --sources-out s.u64bin "
                         "--threads 1"),
                 0, "stderr: %s", slurp("err.txt"));
    cr_assert_null(strchr(slurp("err.txt"), '\r'), "progress bar drawn into a file");
    cr_assert_not_null(strstr(slurp("err.txt"), "wrote a.fbin: 3000 x 48"));
    cr_assert_eq(datagen("--kind clustered --count 3000 --dim 48 --clusters 10 --seed 3 "
                         "--out b.fbin --threads 2"),
                 0);
    cr_assert(same_bytes("a.fbin", "b.fbin"), "thread count changed the output");
    /* the file holds exactly the library generator's rows */
    sieve_ds_error err = {0};
    sieve_ds_gen_params p;
    sieve_ds_gen_params_init(&p, SIEVE_DS_GEN_CLUSTERED);
    p.count = 3000;
    p.dim = 48;
    p.clusters = 10;
    p.seed = 3;
    sieve_ds_gen *g;
    EXPECT_OK(err, sieve_ds_gen_create(&p, &g, &err));
    float *want = malloc(3000 * 48 * sizeof(float)), *got = malloc(3000 * 48 * sizeof(float));
    sieve_ds_gen_rows(g, 0, 3000, want);
    sieve_ds_reader *r;
    size_t nr;
    EXPECT_OK(err, sieve_ds_reader_open(tpath("a.fbin"), SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    EXPECT_OK(err, sieve_ds_reader_read_f32(r, 3000, got, &nr, &err));
    EXPECT_U64(nr, 3000);
    expect_floats_eq(got, want, 3000 * 48, "a.fbin");
    sieve_ds_reader_close(r);
    float wq[7 * 48];
    uint64_t ws[7], gs[7];
    sieve_ds_gen_queries(g, 0, 7, wq, ws);
    EXPECT_OK(err, sieve_ds_reader_open(tpath("q.npy"), SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    EXPECT_OK(err, sieve_ds_reader_read_f32(r, 7, got, &nr, &err));
    EXPECT_U64(nr, 7);
    expect_floats_eq(got, wq, 7 * 48, "q.npy");
    sieve_ds_reader_close(r);
    EXPECT_OK(err, sieve_ds_reader_open(tpath("s.u64bin"), SIEVE_DS_FORMAT_AUTO, 0, &r, &err));
    EXPECT_OK(err, sieve_ds_reader_read_u64(r, 7, gs, &nr, &err));
    for (int i = 0; i < 7; i++) EXPECT_U64(gs[i], ws[i]);
    sieve_ds_reader_close(r);
    sieve_ds_gen_destroy(g);
    free(want);
    free(got);

    /* adversarial set with its query, float16 npy, fvecs */
    cr_assert_eq(datagen("--kind adversarial:duplicates --count 100 --dim 16 --out d.fvecs "
                         "--queries-out dq.fbin"),
                 0, "stderr: %s", slurp("err.txt"));
    cr_assert_eq(datagen("--kind gaussian --normalize --count 64 --dim 8 --out h.npy --dtype f16"), 0,
                 "stderr: %s", slurp("err.txt"));
    cr_assert_eq(datagen("--check d.fvecs dq.fbin h.npy a.fbin s.u64bin"), 0, "stderr: %s",
                 slurp("err.txt"));
    char *out = slurp("out.txt");
    cr_assert_not_null(strstr(out, "d.fvecs: fvecs, float32, 100 x 16"), "%s", out);
    cr_assert_not_null(strstr(out, "dq.fbin: fbin, float32, 1 x 16"), "%s", out);
    cr_assert_not_null(strstr(out, "h.npy: npy, float16, 64 x 8"), "%s", out);
    cr_assert_not_null(strstr(out, "s.u64bin: u64bin, uint64, 7 x 1"), "%s", out);
}

Test(datagen, check_reports_bad_files) {
    unsigned char h[8] = {10, 0, 0, 0, 4, 0, 0, 0}; /* 10 x 4 but no data */
    write_file(tpath("cut.fbin"), h, 8);
    write_text(tpath("p.jsonl"), "{\"id\": 1, \"vector\": [1, 2]}\n{\"id\": 2, \"vector\": [1]}\n");
    cr_assert_eq(datagen("--check cut.fbin"), 1);
    cr_assert_not_null(strstr(slurp("err.txt"),
                              "cut.fbin: header says 10 x 4 (168 bytes expected) but file has 8 "
                              "bytes"),
                       "%s", slurp("err.txt"));
    cr_assert_eq(datagen("--check p.jsonl"), 1);
    cr_assert_not_null(strstr(slurp("err.txt"), "p.jsonl:2: \"vector\" has 1 values; expected 2"),
                       "%s", slurp("err.txt"));
}
