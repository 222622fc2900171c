/* test_api.c: black-box tests of sieve-server's service, collection and point routes,
 * auth and body limits, each against a real server process over HTTP. */
#define _GNU_SOURCE /* vasprintf, open_memstream */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include "tcommon.h"

TestSuite(service, .init = fixture_init, .fini = fixture_fini);
TestSuite(collections, .init = fixture_init, .fini = fixture_fini);
TestSuite(points, .init = fixture_init, .fini = fixture_fini);
TestSuite(auth, .init = fixture_init, .fini = fixture_fini);
TestSuite(limits, .init = fixture_init, .fini = fixture_fini);

/* ---------------------------------------------------------------- service */

Test(service, root_health_metrics_and_unknown_routes) {
    START(END);
    go("GET", "/", NULL);
    EXPECT_STATUS(200);
    cr_assert(R.json, "GET / is not JSON: %s", R.body);
    const char *title = json_string_value(json_object_get(R.json, "title"));
    const char *version = json_string_value(json_object_get(R.json, "version"));
    cr_assert(title && strstr(title, "sieve"), "title: %s", R.body);
    cr_assert(version && version[0] >= '0' && version[0] <= '9', "version: %s", R.body);

    const char *health[] = {"/healthz", "/livez", "/readyz"};
    for (int i = 0; i < 3; i++) {
        go("GET", health[i], NULL);
        EXPECT_STATUS(200);
        cr_assert(strstr(R.content_type, "text/plain"), "%s content type %s", health[i],
                  R.content_type);
    }
    go("GET", "/nope", NULL);
    EXPECT_ERROR(404, "unknown path");
    go("GET", "/collections/a/b/c/d/e", NULL);
    EXPECT_ERROR(404, "unknown path");
    go("PATCH", "/collections/abc", "{}");
    EXPECT_ERROR(405, "PATCH");
    go("POST", "/collections", "{}");
    EXPECT_ERROR(405, "not allowed");

    go("GET", "/metrics", NULL);
    EXPECT_STATUS(200);
    cr_assert(strstr(R.content_type, "text/plain"), "metrics content type %s", R.content_type);
    const char *names[] = {"sieve_http_requests_total{method=\"GET\",route=\"/healthz\","
                           "status=\"200\"} 1",
                           "sieve_http_request_duration_seconds_bucket", "sieve_batch_size_count",
                           "sieve_kernel_seconds_count", "sieve_device_memory_used_bytes",
                           "sieve_collection_points", "sieve_search_path_total",
                           "sieve_search_select_segmented_total",
                           "sieve_search_select_speculated_total 0",
                           "sieve_search_speculation_missed_total 0",
                           "sieve_search_launches_chained_total 0"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        cr_assert(strstr(R.body, names[i]), "metrics lack %s:\n%s", names[i], R.body);
    stop_ok();
}

/* ---------------------------------------------------------------- collections */

Test(collections, lifecycle_and_collection_info) {
    START(END);
    go("GET", "/collections", NULL);
    json_t *res = ok_result();
    cr_assert_eq(json_array_size(json_object_get(res, "collections")), 0, "%s", R.body);

    go("PUT", "/collections/docs", "{\"vectors\":{\"size\":4,\"distance\":\"Dot\"}}");
    cr_assert(json_is_true(ok_result()), "%s", R.body);
    go("PUT", "/collections/docs", "{\"vectors\":{\"size\":4,\"distance\":\"Dot\"}}");
    EXPECT_ERROR(409, "already exists");

    go("GET", "/collections/docs/exists", NULL);
    cr_assert(json_is_true(json_object_get(ok_result(), "exists")), "%s", R.body);
    go("GET", "/collections/other/exists", NULL);
    cr_assert(json_is_false(json_object_get(ok_result(), "exists")), "%s", R.body);

    /* Payload indexes are accepted and change nothing. */
    go("PUT", "/collections/docs/index", "{\"field_name\":\"city\",\"field_schema\":\"keyword\"}");
    cr_assert_str_eq(json_string_value(json_object_get(ok_result(), "status")), "completed");
    go("PUT", "/collections/docs/index", "{\"field_schema\":\"keyword\"}");
    EXPECT_ERROR(400, "field_name");
    go("DELETE", "/collections/docs/index/city", NULL);
    ok_result();
    go("PUT", "/collections/nope/index", "{\"field_name\":\"city\"}");
    EXPECT_ERROR(404, "nope");

    go("GET", "/collections/docs", NULL);
    res = ok_result();
    cr_assert_str_eq(json_string_value(json_object_get(res, "status")), "green");
    cr_assert_str_eq(json_string_value(json_object_get(res, "optimizer_status")), "ok");
    cr_assert_eq(json_integer_value(json_object_get(res, "points_count")), 0);
    cr_assert(json_is_integer(json_object_get(res, "segments_count")), "%s", R.body);
    cr_assert(json_is_object(json_object_get(res, "payload_schema")), "%s", R.body);
    json_t *cfg = json_object_get(res, "config");
    json_t *vec = json_object_get(json_object_get(cfg, "params"), "vectors");
    cr_assert_eq(json_integer_value(json_object_get(vec, "size")), 4, "%s", R.body);
    cr_assert_str_eq(json_string_value(json_object_get(vec, "distance")), "Dot");
    cr_assert_str_eq(json_string_value(json_object_get(vec, "datatype")), "float32");
    const char *hnsw[] = {"m", "ef_construct", "full_scan_threshold"};
    for (int i = 0; i < 3; i++)
        cr_assert(json_is_integer(json_object_get(json_object_get(cfg, "hnsw_config"), hnsw[i])),
                  "hnsw_config.%s missing: %s", hnsw[i], R.body);
    const char *opt[] = {"deleted_threshold", "vacuum_min_vector_number",
                         "default_segment_number", "flush_interval_sec"};
    for (int i = 0; i < 4; i++)
        cr_assert(json_object_get(json_object_get(cfg, "optimizer_config"), opt[i]),
                  "optimizer_config.%s missing: %s", opt[i], R.body);

    go("PUT", "/collections/half", "{\"vectors\":{\"size\":8,\"distance\":\"Cosine\","
                                   "\"datatype\":\"float16\"}}");
    ok_result();
    go("PUT", "/collections/brain", "{\"vectors\":{\"size\":8,\"distance\":\"Euclid\","
                                    "\"datatype\":\"bfloat16\"},\"hnsw_config\":{\"m\":16},"
                                    "\"on_disk_payload\":true}");
    ok_result();
    go("GET", "/collections/half", NULL);
    res = ok_result();
    vec = json_object_get(json_object_get(json_object_get(res, "config"), "params"), "vectors");
    cr_assert_str_eq(json_string_value(json_object_get(vec, "datatype")), "float16");
    cr_assert_str_eq(json_string_value(json_object_get(vec, "distance")), "Cosine");
    go("GET", "/collections/brain", NULL);
    res = ok_result();
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(res, "sieve"),
                                                       "datatype")), "bfloat16");

    go("GET", "/collections", NULL);
    res = json_object_get(ok_result(), "collections");
    cr_assert_eq(json_array_size(res), 3, "%s", R.body);

    go("DELETE", "/collections/docs", NULL);
    cr_assert(json_is_true(ok_result()), "%s", R.body);
    go("DELETE", "/collections/docs", NULL); /* Qdrant answers false, not an error */
    cr_assert(json_is_false(ok_result()), "%s", R.body);
    go("GET", "/collections/docs", NULL);
    EXPECT_ERROR(404, "not found");
    go("GET", "/collections/docs/exists", NULL);
    cr_assert(json_is_false(json_object_get(ok_result(), "exists")), "%s", R.body);
    stop_ok();
}

Test(collections, create_rejects_bad_input_with_field_names) {
    START(END);
    static const struct {
        const char *path, *body;
        int status;
        const char *needle;
    } cases[] = {
        {"/collections/bad%20name", "{\"vectors\":{\"size\":4,\"distance\":\"Dot\"}}", 400,
         "collection name"},
        {"/collections/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
         "{\"vectors\":{\"size\":4,\"distance\":\"Dot\"}}", 400, "collection name"},
        {"/collections/%2e%2e", "{\"vectors\":{\"size\":4,\"distance\":\"Dot\"}}", 400,
         "collection name"},
        {"/collections/c", "{}", 400, "vectors"},
        {"/collections/c", "{\"vectors\":{\"size\":0,\"distance\":\"Dot\"}}", 400,
         "vectors.size"},
        {"/collections/c", "{\"vectors\":{\"size\":65537,\"distance\":\"Dot\"}}", 400,
         "vectors.size"},
        {"/collections/c", "{\"vectors\":{\"size\":\"4\",\"distance\":\"Dot\"}}", 400,
         "vectors.size"},
        {"/collections/c", "{\"vectors\":{\"size\":4}}", 400, "vectors.distance"},
        {"/collections/c", "{\"vectors\":{\"size\":4,\"distance\":\"Manhattan\"}}", 400,
         "vectors.distance"},
        {"/collections/c", "{\"vectors\":{\"size\":4,\"distance\":\"Dot\",\"datatype\":"
                           "\"uint8\"}}", 400, "vectors.datatype"},
        {"/collections/c", "{\"vectors\":{\"size\":4,\"distance\":\"Dot\",\"bogus\":1}}", 400,
         "vectors.bogus"},
        {"/collections/c", "{\"vectors\":{\"img\":{\"size\":4,\"distance\":\"Dot\"}}}", 400,
         "named vectors"},
        {"/collections/c", "{\"vectors\":{\"size\":4,\"distance\":\"Dot\"},\"nonsense\":1}",
         400, "nonsense"},
        {"/collections/c", "{\"vectors\":{\"size\":4,\"distance\":\"Dot\"}", 400,
         "invalid JSON"},
        {"/collections/c", "{\"vectors\":1,\"vectors\":2}", 400, "invalid JSON"},
        {"/collections/c", "[1,2]", 400, "expected a JSON object"},
        {"/collections/c", NULL, 400, "empty body"},
        {"/collections/c", "{\"vectors\":[4,\"Dot\"]}", 400, "vectors"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        go_raw("PUT", cases[i].path, cases[i].body);
        cr_assert_eq(R.status, cases[i].status, "case %zu (%s): expected %d, got %ld: %s", i,
                     cases[i].body ? cases[i].body : "(none)", cases[i].status, R.status,
                     R.body);
        cr_assert(strstr(th_error(&R), cases[i].needle),
                  "case %zu: error \"%s\" should mention \"%s\"", i, th_error(&R),
                  cases[i].needle);
    }
    go("GET", "/collections", NULL);
    cr_assert_eq(json_array_size(json_object_get(ok_result(), "collections")), 0,
                 "a rejected create left a collection behind: %s", R.body);
    go("GET", "/collections/bad%20name", NULL);
    EXPECT_ERROR(400, "collection name");
    stop_ok();
}

/* ---------------------------------------------------------------- points */

#define UUID1 "550e8400-e29b-41d4-a716-446655440000"

static json_t *find_record(json_t *arr, json_t *id) {
    size_t i;
    json_t *r;
    json_array_foreach(arr, i, r) {
        if (json_equal(json_object_get(r, "id"), id)) return r;
    }
    return NULL;
}

Test(points, upsert_both_forms_retrieve_get_and_overwrite) {
    START(END);
    go("PUT", "/collections/p", "{\"vectors\":{\"size\":3,\"distance\":\"Dot\"}}");
    ok_result();
    go("PUT", "/collections/p/points?wait=true",
       "{\"points\":[{\"id\":1,\"vector\":[1,2,3],\"payload\":{\"city\":\"Oslo\",\"n\":1}},"
       "{\"id\":\"" UUID1 "\",\"vector\":[0.5,-0.25,4],\"payload\":{\"tags\":[\"a\",\"b\"]}},"
       "{\"id\":2,\"vector\":{\"\":[7,8,9]}}]}");
    json_t *res = ok_result();
    cr_assert_str_eq(json_string_value(json_object_get(res, "status")), "completed");
    cr_assert(json_is_integer(json_object_get(res, "operation_id")), "%s", R.body);

    go("PUT", "/collections/p/points",
       "{\"batch\":{\"ids\":[10,11],\"vectors\":[[1,0,0],[0,1,0]],"
       "\"payloads\":[{\"k\":true},null]}}");
    ok_result();
    cr_assert_eq(api_count("p"), 5);

    go("POST", "/collections/p/points",
       "{\"ids\":[1,\"" UUID1 "\",999,1],\"with_vector\":true}");
    res = ok_result();
    cr_assert_eq(json_array_size(res), 2, "missing ids are skipped, repeats once: %s", R.body);
    json_t *one = json_integer(1), *uid = json_string(UUID1);
    json_t *r1 = find_record(res, one), *ru = find_record(res, uid);
    cr_assert(r1 && ru, "records: %s", R.body);
    expect_vec(json_object_get(r1, "vector"), (const double[]){1, 2, 3}, 3, "vector of 1");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(r1, "payload"), "city")),
                     "Oslo");
    json_t *tags = json_object_get(json_object_get(ru, "payload"), "tags");
    cr_assert_eq(json_array_size(tags), 2, "%s", R.body);
    expect_vec(json_object_get(ru, "vector"), (const double[]){0.5, -0.25, 4}, 3,
               "vector of uuid");

    go("POST", "/collections/p/points", "{\"ids\":[1,10,11],\"with_payload\":[\"n\"]}");
    res = ok_result();
    cr_assert_eq(json_array_size(res), 3, "%s", R.body);
    json_t *p1 = json_object_get(find_record(res, one), "payload");
    cr_assert_eq(json_object_size(p1), 1, "only n selected: %s", R.body);
    cr_assert_eq(json_integer_value(json_object_get(p1, "n")), 1);
    cr_assert(json_is_null(json_object_get(find_record(res, one), "vector")), "%s", R.body);

    go("GET", "/collections/p/points/" UUID1, NULL);
    res = ok_result();
    cr_assert(json_equal(json_object_get(res, "id"), uid), "%s", R.body);
    cr_assert_eq(json_array_size(json_object_get(res, "vector")), 3, "%s", R.body);
    go("GET", "/collections/p/points/2", NULL);
    res = ok_result();
    cr_assert_eq(json_object_size(json_object_get(res, "payload")), 0, "%s", R.body);
    go("GET", "/collections/p/points/12345", NULL);
    EXPECT_ERROR(404, "12345");
    go("GET", "/collections/p/points/not-an-id", NULL);
    EXPECT_ERROR(400, "point id");
    go("GET", "/collections/zz/points/1", NULL);
    EXPECT_ERROR(404, "zz");

    /* Overwrite: new vector, payload cleared. */
    go("PUT", "/collections/p/points", "{\"points\":[{\"id\":1,\"vector\":[-1,-1,-1]}]}");
    ok_result();
    cr_assert_eq(api_count("p"), 5);
    go("GET", "/collections/p/points/1", NULL);
    res = ok_result();
    expect_vec(json_object_get(res, "vector"), (const double[]){-1, -1, -1}, 3,
               "overwritten vector");
    cr_assert_eq(json_object_size(json_object_get(res, "payload")), 0, "%s", R.body);

    go("PUT", "/collections/p/points", "{\"points\":[]}");
    ok_result();
    cr_assert_eq(api_count("p"), 5);
    json_decref(one);
    json_decref(uid);
    stop_ok();
}

Test(points, bad_upserts_name_the_field_and_write_nothing) {
    START(END);
    go("PUT", "/collections/p", "{\"vectors\":{\"size\":3,\"distance\":\"Cosine\"}}");
    ok_result();
    static const struct {
        const char *body, *needle;
    } cases[] = {
        {"{\"points\":[{\"id\":1,\"vector\":[1,2,3]},{\"id\":2,\"vector\":[1,2]}]}",
         "points[1].vector"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,\"x\",3]}]}", "points[0].vector[1]"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,2,1e39]}]}", "points[0].vector[2]"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,2,-1e300]}]}", "float32"},
        {"{\"points\":[{\"vector\":[1,2,3]}]}", "points[0].id"},
        {"{\"points\":[{\"id\":-5,\"vector\":[1,2,3]}]}", "points[0].id"},
        {"{\"points\":[{\"id\":\"not-a-uuid\",\"vector\":[1,2,3]}]}", "points[0].id"},
        {"{\"points\":[{\"id\":1.5,\"vector\":[1,2,3]}]}", "points[0].id"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,2,3],\"payload\":[1]}]}", "points[0].payload"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,2,3],\"colour\":1}]}", "points[0].colour"},
        {"{\"points\":[{\"id\":1}]}", "points[0].vector"},
        {"{\"points\":[{\"id\":1,\"vector\":{\"img\":[1,2,3]}}]}", "points[0].vector"},
        {"{\"points\":{\"id\":1}}", "points"},
        {"{\"points\":[],\"batch\":{\"ids\":[],\"vectors\":[]}}", "exactly one"},
        {"{}", "exactly one"},
        {"{\"batch\":{\"ids\":[1,2],\"vectors\":[[1,2,3]]}}", "batch.vectors"},
        {"{\"batch\":{\"ids\":[1],\"vectors\":[[1,2,3]],\"payloads\":[{},{}]}}",
         "batch.payloads"},
        {"{\"batch\":{\"ids\":[1],\"vectors\":[[1,2,3,4]]}}", "batch.vectors[0]"},
        {"{\"batch\":{\"ids\":[\"x\"],\"vectors\":[[1,2,3]]}}", "batch.ids[0]"},
        {"{\"points\":[{\"id\":1,\"vector\":[NaN,2,3]}]}", "invalid JSON"},
        {"{\"points\":[{\"id\":1,\"vector\":[Infinity,2,3]}]}", "invalid JSON"},
        {"{\"points\":[{\"id\":1,\"vector\":[1e400,2,3]}]}", "invalid JSON"},
        {"{\"points\":[{\"id\":18446744073709551615,\"vector\":[1,2,3]}]}", "invalid JSON"},
        {"\xff\xfe\x01garbage", "invalid JSON"},
        {"{\"points\":[{\"id\":1,\"vector\":[1,2,3],\"payload\":{\"a\":\"\xff\"}}]}",
         "invalid JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        go_raw("PUT", "/collections/p/points", cases[i].body);
        cr_assert_eq(R.status, 400, "case %zu (%s): expected 400, got %ld: %s", i,
                     cases[i].body, R.status, R.body);
        cr_assert(strstr(th_error(&R), cases[i].needle),
                  "case %zu: error \"%s\" should mention \"%s\"", i, th_error(&R),
                  cases[i].needle);
        cr_assert_eq(api_count("p"), 0, "case %zu half-applied a write", i);
    }
    go("PUT", "/collections/none/points", "{\"points\":[{\"id\":1,\"vector\":[1,2,3]}]}");
    EXPECT_ERROR(404, "none");

    /* Values the collection's storage cannot hold. */
    go("PUT", "/collections/h", "{\"vectors\":{\"size\":2,\"distance\":\"Dot\",\"datatype\":"
                                "\"float16\"}}");
    ok_result();
    go("PUT", "/collections/h/points", "{\"points\":[{\"id\":1,\"vector\":[1,2]},{\"id\":2,"
                                       "\"vector\":[1,70000]}]}");
    EXPECT_ERROR(400, "points[1].vector[1]");
    cr_assert(strstr(th_error(&R), "float16"), "%s", th_error(&R));
    cr_assert_eq(api_count("h"), 0);
    go("PUT", "/collections/e", "{\"vectors\":{\"size\":2,\"distance\":\"Euclid\"}}");
    ok_result();
    go("PUT", "/collections/e/points", "{\"batch\":{\"ids\":[1,2],\"vectors\":[[1,2],[3e20,3e20]]}}");
    EXPECT_ERROR(400, "batch.vectors[1]");
    cr_assert_eq(api_count("e"), 0);
    /* Cosine normalises first: large values are fine there. */
    go("PUT", "/collections/p/points", "{\"points\":[{\"id\":1,\"vector\":[3e20,3e20,1]}]}");
    ok_result();
    cr_assert_eq(api_count("p"), 1);
    stop_ok();
}

Test(points, delete_count_and_scroll) {
    START(END);
    go("PUT", "/collections/p", "{\"vectors\":{\"size\":2,\"distance\":\"Euclid\"}}");
    ok_result();
    char body[8192];
    size_t off = (size_t)snprintf(body, sizeof body, "{\"points\":[");
    for (int i = 0; i < 10; i++)
        off += (size_t)snprintf(body + off, sizeof body - off,
                                "%s{\"id\":%d,\"vector\":[%d,1],\"payload\":{\"n\":%d,"
                                "\"parity\":\"%s\"}}", i ? "," : "", i, i, i,
                                i % 2 ? "odd" : "even");
    snprintf(body + off, sizeof body - off, "]}");
    go_raw("PUT", "/collections/p/points", body);
    ok_result();
    cr_assert_eq(api_count("p"), 10);
    go("POST", "/collections/p/points/count",
       "{\"filter\":{\"must\":[{\"key\":\"parity\",\"match\":{\"value\":\"even\"}}]},"
       "\"exact\":true}");
    cr_assert_eq(json_integer_value(json_object_get(ok_result(), "count")), 5, "%s", R.body);
    go_raw("POST", "/collections/p/points/count", NULL); /* empty body counts everything */
    cr_assert_eq(json_integer_value(json_object_get(ok_result(), "count")), 10, "%s", R.body);

    go("POST", "/collections/p/points/delete", "{\"points\":[0,1,12345]}");
    ok_result();
    cr_assert_eq(api_count("p"), 8);
    go("POST", "/collections/p/points/delete?wait=true",
       "{\"filter\":{\"must\":[{\"key\":\"n\",\"range\":{\"gte\":8}}]}}");
    ok_result();
    cr_assert_eq(api_count("p"), 6);
    go("POST", "/collections/p/points", "{\"ids\":[0,1,8,9,5]}");
    json_t *res = ok_result();
    cr_assert_eq(json_array_size(res), 1, "only 5 is left of those: %s", R.body);

    go("POST", "/collections/p/points/scroll", "{\"limit\":4}");
    res = ok_result();
    json_t *pts = json_object_get(res, "points");
    cr_assert_eq(json_array_size(pts), 4, "%s", R.body);
    cr_assert_eq(json_integer_value(json_object_get(json_array_get(pts, 0), "id")), 2);
    cr_assert_eq(json_integer_value(json_object_get(res, "next_page_offset")), 6, "%s", R.body);
    go("POST", "/collections/p/points/scroll", "{\"limit\":4,\"offset\":6}");
    res = ok_result();
    cr_assert_eq(json_array_size(json_object_get(res, "points")), 2, "%s", R.body);
    cr_assert(json_is_null(json_object_get(res, "next_page_offset")), "%s", R.body);

    go("POST", "/collections/p/points/delete", "{}");
    EXPECT_ERROR(400, "exactly one");
    go("POST", "/collections/p/points/delete", "{\"points\":[-1]}");
    EXPECT_ERROR(400, "points[0]");
    go("POST", "/collections/p/points/delete", "{\"filter\":{\"must\":[{\"key\":\"n\","
                                               "\"ranges\":{}}]}}");
    EXPECT_ERROR(400, "filter.must[0].ranges");
    go("POST", "/collections/p/points/count", "{\"filter\":{\"mustt\":[]}}");
    EXPECT_ERROR(400, "filter.mustt");
    cr_assert_eq(api_count("p"), 6);
    go("POST", "/collections/q/points/delete", "{\"points\":[1]}");
    EXPECT_ERROR(404, "q");
    stop_ok();
}

/* ---------------------------------------------------------------- auth */

Test(auth, keys_gate_every_route_but_the_open_ones) {
    START("--api-key", "s3cret-key", "--read-only-api-key", "reader-key", END);
    const char *open[] = {"/", "/healthz", "/livez", "/readyz"};
    for (int i = 0; i < 4; i++) {
        go("GET", open[i], NULL);
        EXPECT_STATUS(200);
    }
    go("GET", "/collections", NULL);
    EXPECT_ERROR(401, "api key");
    go("GET", "/metrics", NULL);
    EXPECT_STATUS(401);
    KEY = "wrong";
    go("GET", "/collections", NULL);
    EXPECT_ERROR(401, "invalid api key");
    KEY = "s3cret-ke"; /* a prefix is wrong too */
    go("GET", "/collections", NULL);
    EXPECT_STATUS(401);
    KEY = "s3cret-key";
    go("GET", "/collections", NULL);
    ok_result();
    go("PUT", "/collections/c", "{\"vectors\":{\"size\":2,\"distance\":\"Dot\"}}");
    ok_result();
    go("PUT", "/collections/c/points", "{\"points\":[{\"id\":1,\"vector\":[1,0]}]}");
    ok_result();
    go("GET", "/metrics", NULL);
    EXPECT_STATUS(200);

    th_resp_free(&R);
    cr_assert_eq(th_req_bearer(&S, "GET", "/collections/c", NULL, "s3cret-key", &R), 0);
    ok_result();
    th_resp_free(&R);
    cr_assert_eq(th_req_bearer(&S, "GET", "/collections/c", NULL, "nope", &R), 0);
    EXPECT_STATUS(401);

    KEY = "reader-key";
    go("GET", "/collections/c", NULL);
    ok_result();
    go("POST", "/collections/c/points/search", "{\"vector\":[1,0],\"limit\":1}");
    cr_assert_eq(json_array_size(ok_result()), 1, "%s", R.body);
    go("POST", "/collections/c/points/count", "{}");
    ok_result();
    go("POST", "/collections/c/points", "{\"ids\":[1]}");
    ok_result();
    go("PUT", "/collections/d", "{\"vectors\":{\"size\":2,\"distance\":\"Dot\"}}");
    EXPECT_ERROR(403, "read-only");
    go("PUT", "/collections/c/points", "{\"points\":[{\"id\":2,\"vector\":[1,0]}]}");
    EXPECT_ERROR(403, "read-only");
    go("POST", "/collections/c/points/delete", "{\"points\":[1]}");
    EXPECT_ERROR(403, "read-only");
    go("DELETE", "/collections/c", NULL);
    EXPECT_ERROR(403, "read-only");
    th_resp_free(&R);
    cr_assert_eq(th_req_bearer(&S, "DELETE", "/collections/c", NULL, "reader-key", &R), 0);
    EXPECT_STATUS(403);

    KEY = "s3cret-key";
    cr_assert_eq(api_count("c"), 1, "a refused write changed data");
    go("GET", "/collections/d/exists", NULL);
    cr_assert(json_is_false(json_object_get(ok_result(), "exists")), "%s", R.body);
    stop_ok();
}

/* ---------------------------------------------------------------- limits */

Test(limits, bodies_over_the_cap_get_413) {
    START("--max-body", "4k", END);
    go("PUT", "/collections/c", "{\"vectors\":{\"size\":2,\"distance\":\"Dot\"}}");
    ok_result();
    size_t n = 6000;
    char *big = malloc(n + 64);
    cr_assert(big);
    int off = snprintf(big, n + 64, "{\"vector\":[1,0],\"limit\":1,\"pad\":\"");
    memset(big + off, 'x', n - (size_t)off);
    snprintf(big + n, 64, "\"}");
    go_raw("POST", "/collections/c/points/search", big);
    EXPECT_ERROR(413, "too large");
    /* Without Content-Length (chunked) the cap applies while reading. */
    th_resp_free(&R);
    cr_assert_eq(th_req_chunked(&S, "POST", "/collections/c/points/search", big, strlen(big),
                                &R), 0);
    EXPECT_ERROR(413, "too large");
    free(big);
    /* Just under the cap works, chunked or not. */
    char ok[4000];
    off = snprintf(ok, sizeof ok, "{\"points\":[{\"id\":1,\"vector\":[1,0],\"payload\":{\"s\":\"");
    memset(ok + off, 'y', 3000);
    snprintf(ok + off + 3000, sizeof ok - (size_t)off - 3000, "\"}}]}");
    go_raw("PUT", "/collections/c/points", ok);
    ok_result();
    th_resp_free(&R);
    const char *small = "{\"vector\":[1,0],\"limit\":3}";
    cr_assert_eq(th_req_chunked(&S, "POST", "/collections/c/points/search",
                                small, strlen(small), &R), 0);
    cr_assert_eq(json_array_size(ok_result()), 1, "%s", R.body);
    go("GET", "/healthz", NULL);
    EXPECT_STATUS(200);
    stop_ok();
}

/* Raw HTTP: connect to the fixture's server. */
static int raw_connect(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)S.port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

static void send_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        cr_assert(w > 0, "write failed");
        p += w;
        n -= (size_t)w;
    }
}

/* The status code of the reply on fd (reads until the status line is complete). */
static int read_status(int fd) {
    char buf[256];
    size_t got = 0;
    while (got < sizeof buf - 1) {
        ssize_t r = read(fd, buf + got, sizeof buf - 1 - got);
        if (r <= 0) break;
        got += (size_t)r;
        buf[got] = 0;
        if (strstr(buf, "\r\n")) break;
    }
    buf[got] = 0;
    int code = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &code) != 1) return -1;
    return code;
}

Test(limits, many_large_bodies_at_once_are_refused_not_buffered) {
    /* --max-body 4k: all bodies together may hold 16 x 4 KiB in memory. */
    START("--max-body", "4k", END);
    go("PUT", "/collections/c", "{\"vectors\":{\"size\":2,\"distance\":\"Dot\"}}");
    ok_result();
    enum { C = 24, LEN = 4000 };
    char *body = malloc(LEN + 1);
    memset(body, ' ', LEN); /* a small search padded with whitespace */
    memcpy(body, "{\"vector\":[1,0],\"limit\":1}", 26);
    body[LEN - 1] = '\n';
    body[LEN] = 0;
    int fds[C];
    char head[256];
    int hl = snprintf(head, sizeof head, "POST /collections/c/points/search HTTP/1.1\r\n"
                                         "Host: x\r\nContent-Type: application/json\r\n"
                                         "Content-Length: %d\r\n\r\n", LEN);
    /* Every connection sends all but the last byte, so all bodies are held at once. */
    for (int i = 0; i < C; i++) {
        fds[i] = raw_connect();
        send_all(fds[i], head, (size_t)hl);
        send_all(fds[i], body, LEN - 1);
    }
    usleep(300 * 1000);
    int ok = 0, busy = 0;
    for (int i = 0; i < C; i++) {
        send_all(fds[i], body + LEN - 1, 1);
        int st = read_status(fds[i]);
        if (st == 200) ok++;
        else if (st == 503) busy++;
        else cr_assert_fail("connection %d: status %d", i, st);
        close(fds[i]);
    }
    free(body);
    cr_assert_gt(busy, 0, "all %d bodies were buffered at once (budget 64 KiB)", C);
    cr_assert_geq(ok, 15, "only %d of %d bodies under the budget were served", ok, C);
    go("GET", "/metrics", NULL);
    cr_assert(strstr(R.body, "status=\"503\""), "%s", R.body);
    stop_ok();
}

Test(limits, result_and_vector_budgets_per_request) {
    START(END);
    go("PUT", "/collections/c", "{\"vectors\":{\"size\":2,\"distance\":\"Dot\"}}");
    ok_result();
    char *body = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&body, &blen);
    fprintf(f, "{\"searches\":[");
    for (int i = 0; i < 65; i++) fprintf(f, "%s{\"vector\":[1,0],\"limit\":16384}", i ? "," : "");
    fprintf(f, "]}");
    fclose(f);
    go_raw("POST", "/collections/c/points/search/batch", body);
    free(body);
    EXPECT_ERROR(400, "offset + limit summed");
    go("PUT", "/collections/wide", "{\"vectors\":{\"size\":4096,\"distance\":\"Dot\"}}");
    ok_result();
    f = open_memstream(&body, &blen);
    fprintf(f, "{\"vector\":[");
    for (int i = 0; i < 4096; i++) fprintf(f, "%s0.5", i ? "," : "");
    fprintf(f, "],\"limit\":16384,\"with_vector\":true}");
    fclose(f);
    go_raw("POST", "/collections/wide/points/search", body);
    free(body);
    EXPECT_ERROR(400, "with_vector");
    stop_ok();
}
