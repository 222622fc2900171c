/* main.c: sieve-server entry (placeholder serving GET /healthz until the server lands). */
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls) {
    const char *body = "{\"title\":\"sieve\",\"status\":\"ok\"}";
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body,
                                                             MHD_RESPMEM_PERSISTENT);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

int main(void) {
    struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 6333, NULL, NULL,
                                            handle, NULL, MHD_OPTION_END);
    if (!d) return 1;
    pause();
    MHD_stop_daemon(d);
    return 0;
}
