/* metrics.c: sieve-server's Prometheus metrics.
 *
 * Owns: counters and histograms (requests by route and status, request latency, batch
 * sizes, kernel time, the kernel's search-path counters, filter-mask work) and rendering
 * them with the live gauges (points per collection, device memory in use, queued queries,
 * requests in flight) as Prometheus text. Must not: block on anything but its own mutex
 * while recording. Thread-safety: every function may be called from any thread.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

static const double lat_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                    0.1,    0.25,  0.5,    1,     2.5,  5,     10};
#define N_LAT (sizeof lat_bounds / sizeof lat_bounds[0])
static const double batch_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
#define N_BATCH (sizeof batch_bounds / sizeof batch_bounds[0])
static const unsigned status_codes[] = {200, 400, 401, 403, 404, 405, 409, 413, 500, 503};
#define N_STATUS (sizeof status_codes / sizeof status_codes[0])
static const char *const path_names[SIEVE_PATH_COUNT] = {"certified", "underfill", "overflow",
                                                         "full", "direct"};

struct sieve__metrics {
    pthread_mutex_t mu;
    uint64_t req[SIEVE_R_COUNT][N_STATUS + 1]; /* last slot: any other status */
    uint64_t lat[SIEVE_R_COUNT][N_LAT + 1];
    double lat_sum[SIEVE_R_COUNT];
    uint64_t batch_hist[N_BATCH + 1];
    uint64_t batch_sum, batch_n;
    uint64_t kern_hist[N_LAT + 1];
    double kern_sum;
    double phase_sum[SIEVE__PHASE_COUNT]; /* batcher worker time by phase, all workers */
    double reply_sum;                      /* search replies built on HTTP threads */
    uint64_t reply_n;
    uint64_t kern_n;
    sieve_search_stats search;
    uint64_t masks_built, masks_cached;
    double mask_seconds;
};

int sieve__metrics_create(sieve__metrics **out) {
    sieve__metrics *m = calloc(1, sizeof *m);
    if (!m) return SIEVE_ENOMEM;
    if (pthread_mutex_init(&m->mu, NULL)) {
        free(m);
        return SIEVE_ENOMEM;
    }
    *out = m;
    return 0;
}

void sieve__metrics_destroy(sieve__metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static size_t bucket(const double *bounds, size_t n, double v) {
    size_t i = 0;
    while (i < n && v > bounds[i]) i++;
    return i; /* n means +Inf only */
}

void sieve__metrics_request(sieve__metrics *m, sieve__route r, unsigned status,
                            double seconds) {
    if ((unsigned)r >= SIEVE_R_COUNT) r = SIEVE_R_UNMATCHED;
    size_t s = N_STATUS;
    for (size_t i = 0; i < N_STATUS; i++)
        if (status_codes[i] == status) s = i;
    size_t b = bucket(lat_bounds, N_LAT, seconds);
    pthread_mutex_lock(&m->mu);
    m->req[r][s]++;
    m->lat[r][b]++;
    m->lat_sum[r] += seconds;
    pthread_mutex_unlock(&m->mu);
}

void sieve__metrics_batch(sieve__metrics *m, uint32_t queries, double kernel_s,
                          const sieve_search_stats *st) {
    size_t b = bucket(batch_bounds, N_BATCH, (double)queries);
    size_t k = bucket(lat_bounds, N_LAT, kernel_s);
    pthread_mutex_lock(&m->mu);
    m->batch_hist[b]++;
    m->batch_sum += queries;
    m->batch_n++;
    if (st) {
        m->kern_hist[k]++;
        m->kern_sum += kernel_s;
        m->kern_n++;
        sieve_search_stats_add(&m->search, st);
    }
    pthread_mutex_unlock(&m->mu);
}

void sieve__metrics_phase(sieve__metrics *m, sieve__phase phase, double seconds) {
    if ((unsigned)phase >= SIEVE__PHASE_COUNT) return;
    pthread_mutex_lock(&m->mu);
    m->phase_sum[phase] += seconds;
    pthread_mutex_unlock(&m->mu);
}

void sieve__metrics_reply(sieve__metrics *m, double seconds) {
    pthread_mutex_lock(&m->mu);
    m->reply_sum += seconds;
    m->reply_n++;
    pthread_mutex_unlock(&m->mu);
}

void sieve__metrics_filter(sieve__metrics *m, double seconds, int cached) {
    pthread_mutex_lock(&m->mu);
    if (cached) m->masks_cached++;
    else {
        m->masks_built++;
        m->mask_seconds += seconds;
    }
    pthread_mutex_unlock(&m->mu);
}

static void histogram(sieve__sbuf *o, const char *name, const char *labels,
                      const double *bounds, size_t n, const uint64_t *counts, double sum) {
    uint64_t cum = 0;
    const char *sep = labels[0] ? "," : "";
    for (size_t i = 0; i < n; i++) {
        cum += counts[i];
        sieve__sbuf_printf(o, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, bounds[i],
                           (unsigned long long)cum);
    }
    cum += counts[n];
    sieve__sbuf_printf(o, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep,
                       (unsigned long long)cum);
    if (labels[0]) {
        sieve__sbuf_printf(o, "%s_sum{%s} %.9g\n", name, labels, sum);
        sieve__sbuf_printf(o, "%s_count{%s} %llu\n", name, labels, (unsigned long long)cum);
    } else {
        sieve__sbuf_printf(o, "%s_sum %.9g\n", name, sum);
        sieve__sbuf_printf(o, "%s_count %llu\n", name, (unsigned long long)cum);
    }
}

/* Splits "POST /collections/{name}" into method and path label values. */
static void route_labels(sieve__route r, char *buf, size_t n) {
    const char *name = sieve__route_name(r);
    const char *sp = strchr(name, ' ');
    if (sp) snprintf(buf, n, "method=\"%.*s\",route=\"%s\"", (int)(sp - name), name, sp + 1);
    else snprintf(buf, n, "method=\"\",route=\"%s\"", name);
}

void sieve__metrics_render(sieve_server *s, sieve__sbuf *o) {
    sieve__metrics *m = s->metrics;
    sieve__metrics *c = malloc(sizeof *c); /* snapshot, so rendering holds no lock */
    if (!c) {
        o->failed = 1;
        return;
    }
    pthread_mutex_lock(&m->mu);
    memcpy(c, m, sizeof *c);
    pthread_mutex_unlock(&m->mu);

    char lab[256];
    sieve__sbuf_puts(o, "# HELP sieve_http_requests_total HTTP requests by route and status.\n"
                        "# TYPE sieve_http_requests_total counter\n");
    for (int r = 0; r < SIEVE_R_COUNT; r++) {
        route_labels((sieve__route)r, lab, sizeof lab);
        for (size_t i = 0; i <= N_STATUS; i++) {
            if (!c->req[r][i]) continue;
            if (i < N_STATUS)
                sieve__sbuf_printf(o, "sieve_http_requests_total{%s,status=\"%u\"} %llu\n",
                                   lab, status_codes[i], (unsigned long long)c->req[r][i]);
            else
                sieve__sbuf_printf(o, "sieve_http_requests_total{%s,status=\"other\"} %llu\n",
                                   lab, (unsigned long long)c->req[r][i]);
        }
    }
    sieve__sbuf_puts(o, "# HELP sieve_http_request_duration_seconds Request latency from the "
                        "first byte of the body to the reply.\n"
                        "# TYPE sieve_http_request_duration_seconds histogram\n");
    for (int r = 0; r < SIEVE_R_COUNT; r++) {
        uint64_t total = 0;
        for (size_t i = 0; i <= N_LAT; i++) total += c->lat[r][i];
        if (!total) continue;
        route_labels((sieve__route)r, lab, sizeof lab);
        histogram(o, "sieve_http_request_duration_seconds", lab, lat_bounds, N_LAT, c->lat[r],
                  c->lat_sum[r]);
    }
    sieve__sbuf_puts(o, "# HELP sieve_batch_size Queries per kernel call.\n"
                        "# TYPE sieve_batch_size histogram\n");
    histogram(o, "sieve_batch_size", "", batch_bounds, N_BATCH, c->batch_hist,
              (double)c->batch_sum);
    sieve__sbuf_puts(o, "# HELP sieve_kernel_seconds Wall time of each kernel call.\n"
                        "# TYPE sieve_kernel_seconds histogram\n");
    histogram(o, "sieve_kernel_seconds", "", lat_bounds, N_LAT, c->kern_hist, c->kern_sum);
    {
        static const char *const phase_names[SIEVE__PHASE_COUNT] = {
            "wait", "snapshot", "search", "lookup", "resume", "bookkeeping"};
        sieve__sbuf_printf(o, "# HELP sieve_batch_workers Batch workers over all search devices.\n"
                              "# TYPE sieve_batch_workers gauge\n"
                              "sieve_batch_workers %zu\n",
                           sieve__batcher_workers(s->batcher));
        sieve__sbuf_puts(o, "# HELP sieve_batch_phase_seconds_total Batch worker time by phase, "
                            "summed over the workers (with several workers per device the sum "
                            "can exceed wall time). wait: for queries and the batch window; "
                            "snapshot: opening or re-checking the worker's snapshot; search: "
                            "the device page cache and kernel; lookup: result rows to ids, "
                            "payloads and vectors; resume: handing requests back to their "
                            "connections; bookkeeping: queue and device statistics.\n"
                            "# TYPE sieve_batch_phase_seconds_total counter\n");
        for (int i = 0; i < SIEVE__PHASE_COUNT; i++)
            sieve__sbuf_printf(o, "sieve_batch_phase_seconds_total{phase=\"%s\"} %.9g\n",
                               phase_names[i], c->phase_sum[i]);
        sieve__sbuf_printf(o, "# HELP sieve_search_reply_seconds_total Time building search "
                              "replies (JSON of the results) on HTTP threads, after the batcher "
                              "answered.\n"
                              "# TYPE sieve_search_reply_seconds_total counter\n"
                              "sieve_search_reply_seconds_total %.9g\n"
                              "# HELP sieve_search_replies_total Search replies built.\n"
                              "# TYPE sieve_search_replies_total counter\n"
                              "sieve_search_replies_total %llu\n",
                           c->reply_sum, (unsigned long long)c->reply_n);
    }
    sieve__sbuf_printf(o, "# HELP sieve_search_queries_total Queries answered by the kernel.\n"
                          "# TYPE sieve_search_queries_total counter\n"
                          "sieve_search_queries_total %llu\n",
                       (unsigned long long)c->search.queries);
    sieve__sbuf_puts(o, "# HELP sieve_search_path_total Queries by the kernel path that "
                        "answered them.\n# TYPE sieve_search_path_total counter\n");
    for (int p = 0; p < SIEVE_PATH_COUNT; p++)
        sieve__sbuf_printf(o, "sieve_search_path_total{path=\"%s\"} %llu\n", path_names[p],
                           (unsigned long long)c->search.path_count[p]);
    sieve__sbuf_printf(o, "# HELP sieve_search_rows_scanned_total Rows scored in full scans.\n"
                          "# TYPE sieve_search_rows_scanned_total counter\n"
                          "sieve_search_rows_scanned_total %llu\n"
                          "# HELP sieve_search_rescans_total Extra scans run by recoveries.\n"
                          "# TYPE sieve_search_rescans_total counter\n"
                          "sieve_search_rescans_total %llu\n"
                          "# HELP sieve_search_select_segmented_total Queries whose candidates "
                          "the GPU ordered with the segmented sort (the others: a block sort "
                          "in shared memory).\n"
                          "# TYPE sieve_search_select_segmented_total counter\n"
                          "sieve_search_select_segmented_total %llu\n"
                          "# HELP sieve_search_select_speculated_total Batches whose GPU select "
                          "and result download were queued behind the scan before the host "
                          "certified them (one wait for the device).\n"
                          "# TYPE sieve_search_select_speculated_total counter\n"
                          "sieve_search_select_speculated_total %llu\n"
                          "# HELP sieve_search_speculation_missed_total Speculated batches that "
                          "ran recoveries or the select again after all.\n"
                          "# TYPE sieve_search_speculation_missed_total counter\n"
                          "sieve_search_speculation_missed_total %llu\n"
                          "# HELP sieve_search_launches_chained_total GPU kernels launched "
                          "behind the one before by programmatic dependent launch.\n"
                          "# TYPE sieve_search_launches_chained_total counter\n"
                          "sieve_search_launches_chained_total %llu\n",
                       (unsigned long long)c->search.rows_scanned,
                       (unsigned long long)c->search.rescans,
                       (unsigned long long)c->search.select_segmented,
                       (unsigned long long)c->search.select_speculated,
                       (unsigned long long)c->search.speculation_missed,
                       (unsigned long long)c->search.launches_chained);
    sieve__sbuf_printf(o, "# HELP sieve_filter_masks_total Filter masks built by visiting rows "
                          "(built) or reused (cached).\n"
                          "# TYPE sieve_filter_masks_total counter\n"
                          "sieve_filter_masks_total{source=\"built\"} %llu\n"
                          "sieve_filter_masks_total{source=\"cached\"} %llu\n"
                          "# HELP sieve_filter_mask_seconds_total Time spent building masks.\n"
                          "# TYPE sieve_filter_mask_seconds_total counter\n"
                          "sieve_filter_mask_seconds_total %.9g\n",
                       (unsigned long long)c->masks_built, (unsigned long long)c->masks_cached,
                       c->mask_seconds);
    free(c);

    sieve__sbuf_printf(o, "# HELP sieve_queued_queries Queries waiting for the batcher.\n"
                          "# TYPE sieve_queued_queries gauge\n"
                          "sieve_queued_queries %llu\n"
                          "# HELP sieve_http_requests_in_flight Requests being processed.\n"
                          "# TYPE sieve_http_requests_in_flight gauge\n"
                          "sieve_http_requests_in_flight %ld\n"
                          "# HELP sieve_device_memory_used_bytes Device memory in use by the "
                          "search devices (0 for the CPU).\n"
                          "# TYPE sieve_device_memory_used_bytes gauge\n"
                          "sieve_device_memory_used_bytes %llu\n",
                       (unsigned long long)sieve__batcher_queued(s->batcher),
                       (long)atomic_load(&s->in_flight),
                       (unsigned long long)sieve__batcher_device_memory_used(s->batcher));

    uint64_t cache_bytes = 0, pages = 0, streamed = 0;
    sieve__batcher_cache_stats(s->batcher, &cache_bytes, &pages, &streamed);
    sieve__sbuf_printf(o, "# HELP sieve_device_cache_bytes Device bytes the page caches hold "
                          "(pages, norms, tables, masks; 0 on the CPU).\n"
                          "# TYPE sieve_device_cache_bytes gauge\n"
                          "sieve_device_cache_bytes %llu\n"
                          "# HELP sieve_device_pages_uploaded_total Pages copied to devices "
                          "(refreshes and streamed chunks).\n"
                          "# TYPE sieve_device_pages_uploaded_total counter\n"
                          "sieve_device_pages_uploaded_total %llu\n"
                          "# HELP sieve_device_streamed_searches_total Searches that streamed a "
                          "collection larger than the device budget.\n"
                          "# TYPE sieve_device_streamed_searches_total counter\n"
                          "sieve_device_streamed_searches_total %llu\n",
                       (unsigned long long)cache_bytes, (unsigned long long)pages,
                       (unsigned long long)streamed);
    sieve__sbuf_puts(o, "# HELP sieve_collection_points Live points per collection.\n"
                        "# TYPE sieve_collection_points gauge\n");
    char **names = NULL;
    size_t n = 0;
    if (sieve_store_list_collections(s->store, &names, &n) == 0) {
        for (size_t i = 0; i < n; i++) {
            sieve_collection_info info;
            if (sieve_store_collection_info(s->store, names[i], &info)) continue;
            /* collection names are [A-Za-z0-9_.-]: nothing to escape in a label */
            sieve__sbuf_printf(o, "sieve_collection_points{collection=\"%s\"} %llu\n",
                               names[i], (unsigned long long)info.points);
        }
        sieve_store_free_names(names, n);
    }
}
