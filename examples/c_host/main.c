/* digits_host: classify handwritten digits with the digits MLP compiled into a C library.
 *
 *   digits_host ROWS.txt
 *
 * ROWS.txt holds one image per line: its pixel values as numbers separated by spaces (64 for
 * the 8x8 digits); lines starting with '#' and blank lines are skipped. The program runs the
 * whole file as one batch and prints the predicted class of each row, one per line. There is
 * no Python here: the model, its weights and the runtime are in libdigits_mlp.so, written by
 *
 *   flowc compile examples/digits_mlp.flow --emit c-library --checkpoint PREFIX -o DIR
 *
 * (see README.md in this folder for the whole sequence).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "digits_mlp.h"

/* A growing array of floats. */
typedef struct {
    float *data;
    size_t count, capacity;
} floats;

static int push(floats *v, float x) {
    if (v->count == v->capacity) {
        size_t capacity = v->capacity ? 2 * v->capacity : 1024;
        float *data = (float *)realloc(v->data, capacity * sizeof(float));
        if (!data) return -1;
        v->data = data;
        v->capacity = capacity;
    }
    v->data[v->count++] = x;
    return 0;
}

/* Reads every row of ``path`` into ``pixels``; sets the number of rows and columns. */
static int read_rows(const char *path, floats *pixels, int64_t *rows, int64_t *cols) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "digits_host: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[65536];
    int64_t lineno = 0;
    *rows = 0;
    *cols = -1;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            fprintf(stderr, "digits_host: %s:%lld: line too long\n", path, (long long)lineno);
            fclose(f);
            return -1;
        }
        char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '#' || *p == '\n' || *p == '\r' || *p == '\0') continue;
        int64_t n = 0;
        for (;;) {
            char *end;
            errno = 0;
            const float x = strtof(p, &end);
            if (end == p) break;
            if (errno == ERANGE || push(pixels, x) != 0) {
                fprintf(stderr, "digits_host: %s:%lld: bad number or out of memory\n", path,
                        (long long)lineno);
                fclose(f);
                return -1;
            }
            n++;
            p = end;
        }
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
        if (*p != '\0') {
            fprintf(stderr, "digits_host: %s:%lld: not a number: %.20s\n", path,
                    (long long)lineno, p);
            fclose(f);
            return -1;
        }
        if (*cols >= 0 && n != *cols) {
            fprintf(stderr, "digits_host: %s:%lld: %lld values; the rows before have %lld\n",
                    path, (long long)lineno, (long long)n, (long long)*cols);
            fclose(f);
            return -1;
        }
        *cols = n;
        (*rows)++;
    }
    fclose(f);
    if (*rows == 0) {
        fprintf(stderr, "digits_host: %s: no rows\n", path);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s ROWS.txt\n", argv[0]);
        return 2;
    }
    floats pixels = {0};
    int64_t dims[2];
    if (read_rows(argv[1], &pixels, &dims[0], &dims[1]) != 0) {
        free(pixels.data);
        return 1;
    }
    digits_mlp_model *model = digits_mlp_create();
    if (!model) {
        fprintf(stderr, "digits_host: out of memory creating the model\n");
        free(pixels.data);
        return 1;
    }
    int status = 1;
    const void *data;
    int32_t dtype, rank;
    const int64_t *out_dims;
    /* The library checks the dtype and shape (f32[?,64]) and copies the pixels. */
    if (digits_mlp_set_input(model, DIGITS_MLP_INPUT_X, pixels.data, FLOWC_DTYPE_F32, 2, dims) != 0
        || digits_mlp_run(model) != 0
        || digits_mlp_get_output(model, DIGITS_MLP_OUTPUT_PREDICTIONS, &data, &dtype, &rank,
                                 &out_dims) != 0) {
        fprintf(stderr, "digits_host: %s\n", digits_mlp_last_error(model));
    } else if (dtype != FLOWC_DTYPE_I32 || rank != 1 || out_dims[0] != dims[0]) {
        fprintf(stderr, "digits_host: unexpected predictions (dtype %d, rank %d)\n",
                (int)dtype, (int)rank);
    } else {
        const int32_t *predictions = (const int32_t *)data;
        for (int64_t i = 0; i < out_dims[0]; i++) printf("%d\n", (int)predictions[i]);
        status = 0;
    }
    digits_mlp_destroy(model);
    free(pixels.data);
    return status;
}
