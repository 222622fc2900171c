/* matrix.c: sieve_dev_matrix, a paged matrix the kernel module owns on one device.
 * Owns: the contiguous page storage, norms, masks and page tables of one matrix.
 * Must not: know where the rows come from (the page cache and tests fill them). */
#include <stdlib.h>
#include <string.h>

#include "sieve_kernels_internal.h"

struct sieve_dev_matrix {
    sieve_device *dev;
    sieve_matrix view;
    void *rows;          /* device: n_pages * rpp * dim elements */
    float *norms;        /* device: n_pages * rpp floats */
    void **pages_dev;    /* device: page pointer table */
    float **norms_dev;   /* device: norm page pointer table */
    uint64_t *deleted;   /* device or NULL */
    uint64_t *allowed;   /* device or NULL */
    uint64_t n_pages;
};

void sieve_dev_matrix_destroy(sieve_dev_matrix *dm) {
    if (!dm) return;
    sieve_device_free(dm->dev, dm->rows);
    sieve_device_free(dm->dev, dm->norms);
    sieve_device_free(dm->dev, dm->pages_dev);
    sieve_device_free(dm->dev, dm->norms_dev);
    sieve_device_free(dm->dev, dm->deleted);
    sieve_device_free(dm->dev, dm->allowed);
    free(dm);
}

int sieve_dev_matrix_create(sieve_device *dev, sieve_dtype dtype, uint64_t n_rows, uint32_t dim,
                            uint32_t rows_per_page, sieve_dev_matrix **out) {
    size_t esz = sieve_dtype_size(dtype);
    if (!dev || !out || esz == 0 || dim == 0 || n_rows == 0 || rows_per_page == 0 ||
        rows_per_page % 128)
        return SIEVE_EINVAL;
    *out = NULL;
    sieve_dev_matrix *dm = calloc(1, sizeof *dm);
    if (!dm) return SIEVE_ENOMEM;
    dm->dev = dev;
    dm->n_pages = (n_rows + rows_per_page - 1) / rows_per_page;
    size_t page_bytes = (size_t)rows_per_page * dim * esz;
    void **hp = malloc(dm->n_pages * sizeof *hp);
    float **hn = malloc(dm->n_pages * sizeof *hn);
    int rc = (hp && hn) ? 0 : SIEVE_ENOMEM;
    if (!rc) rc = sieve_device_alloc(dev, dm->n_pages * page_bytes, &dm->rows);
    if (!rc) rc = sieve_device_alloc(dev, dm->n_pages * rows_per_page * sizeof(float), (void **)&dm->norms);
    if (!rc) rc = sieve_device_alloc(dev, dm->n_pages * sizeof(void *), (void **)&dm->pages_dev);
    if (!rc) rc = sieve_device_alloc(dev, dm->n_pages * sizeof(float *), (void **)&dm->norms_dev);
    if (!rc) {
        for (uint64_t p = 0; p < dm->n_pages; p++) {
            hp[p] = (unsigned char *)dm->rows + p * page_bytes;
            hn[p] = dm->norms + p * rows_per_page;
        }
        rc = sieve_device_upload(dev, dm->pages_dev, hp, dm->n_pages * sizeof(void *));
    }
    if (!rc) rc = sieve_device_upload(dev, dm->norms_dev, hn, dm->n_pages * sizeof(float *));
    free(hp);
    free(hn);
    if (rc) {
        sieve_dev_matrix_destroy(dm);
        return rc;
    }
    /* zero norms so an unfilled matrix never holds garbage keys */
    float *z = calloc(rows_per_page, sizeof *z);
    if (!z) {
        sieve_dev_matrix_destroy(dm);
        return SIEVE_ENOMEM;
    }
    for (uint64_t p = 0; p < dm->n_pages && !rc; p++)
        rc = sieve_device_upload(dev, dm->norms + p * rows_per_page, z, rows_per_page * sizeof *z);
    free(z);
    if (rc) {
        sieve_dev_matrix_destroy(dm);
        return rc;
    }
    dm->view.dtype = dtype;
    dm->view.dim = dim;
    dm->view.n_rows = n_rows;
    dm->view.rows_per_page = rows_per_page;
    dm->view.pages = (const void *const *)dm->pages_dev;
    dm->view.norm_pages = (const float *const *)dm->norms_dev;
    dm->view.page_base = dm->rows;
    dm->view.page_stride = (uint64_t)rows_per_page * dim * sieve_dtype_size(dtype);
    *out = dm;
    return 0;
}

const sieve_matrix *sieve_dev_matrix_view(const sieve_dev_matrix *dm) { return &dm->view; }
void *sieve_dev_matrix_rows(sieve_dev_matrix *dm) { return dm->rows; }
float *sieve_dev_matrix_norms(sieve_dev_matrix *dm) { return dm->norms; }

int sieve_dev_matrix_update_norms(sieve_dev_matrix *dm) {
    if (!dm) return SIEVE_EINVAL;
    return sieve_device_row_sqnorms(dm->dev, dm->view.dtype, dm->rows, dm->view.n_rows,
                                    dm->view.dim, dm->norms);
}

static int set_mask(sieve_dev_matrix *dm, uint64_t **slot, const uint64_t *host) {
    size_t bytes = (size_t)((dm->view.n_rows + 63) / 64) * 8;
    if (!host) {
        sieve_device_free(dm->dev, *slot);
        *slot = NULL;
        return 0;
    }
    if (!*slot) {
        int rc = sieve_device_alloc(dm->dev, bytes, (void **)slot);
        if (rc) return rc;
    }
    return sieve_device_upload(dm->dev, *slot, host, bytes);
}

int sieve_dev_matrix_set_masks(sieve_dev_matrix *dm, const uint64_t *deleted,
                               const uint64_t *allowed) {
    if (!dm) return SIEVE_EINVAL;
    int rc = set_mask(dm, &dm->deleted, deleted);
    if (!rc) rc = set_mask(dm, &dm->allowed, allowed);
    dm->view.deleted = dm->deleted;
    dm->view.allowed = dm->allowed;
    return rc;
}
