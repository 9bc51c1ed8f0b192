/* A careless weighting scheme against the raw C ABI (issue 23): parameter `mode` picks one mistake
 * a plugin author makes by accident; every other row is uniform. 2 heads.
 *
 *   ok                  uniform weights, own scenarios "design_a", "design_b" (ABI 1.3 every-slot)
 *   skip-head           head 2's row is never written
 *   half-tokens         only the first half of each report's tokens are written (every row)
 *   skip-baseline       row 0 (the baseline) is never written
 *   slot0-only          declares HEADSEP_WEIGHTING_ALL_SLOTS but fills only slot 0 in such a call
 *   print               prints to stdout (printf and write(1)) in create() and weights()
 *   maps-skip           per-query maps, query 1's row of head 1 never written
 *   spec-zero-baseline  attention spec on the features, heads seeded, the baseline's s_w_* all zero
 *   spec-seeded         the same spec without s_w_* (the seeded baseline)
 *   spec-half-baseline  s_w_q given, s_w_k and s_w_v NULL
 *   spec-nan-baseline   s_w_q holds a NaN
 *   exit                calls exit(0) inside weights()
 *   abort               calls abort() inside weights()
 *   segv                writes through NULL inside weights()
 *   huge-error          weights() fails with a 10 MB message holding ESC, CR and LF */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "headsep/plugin.h"

static _Thread_local char g_error[256];
static char* g_huge;
static const char* last_error(void) { return g_huge ? g_huge : g_error; }

typedef struct state {
  char mode[64];
  const char* names[2];
  uint32_t n_features;
  float zero[64], nan[64];
  headsep_attention_spec spec;
} state;

static int is(const state* s, const char* m) { return strcmp(s->mode, m) == 0; }

static headsep_status create(const headsep_param* p, uint32_t n, const headsep_schema* schema, void** out) {
  state* s = (state*)calloc(1, sizeof *s);
  if (!s) return HEADSEP_ERROR;
  snprintf(s->mode, sizeof s->mode, "ok");
  for (uint32_t i = 0; i < n; ++i)
    if (strcmp(p[i].name, "mode") == 0) snprintf(s->mode, sizeof s->mode, "%s", p[i].value);
  s->n_features = schema->n_features;
  if (is(s, "print")) {
    printf("careless: hello from create\n");
    fflush(stdout);
  }
  *out = s;
  return HEADSEP_OK;
}

static headsep_status describe(void* st, headsep_weighting_info* info) {
  state* s = (state*)st;
  memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
  info->heads = 2;
  info->layout = is(s, "maps-skip") ? HEADSEP_LAYOUT_PER_QUERY : HEADSEP_LAYOUT_PER_TOKEN;
  s->names[0] = "design_a";
  s->names[1] = "design_b";
  info->n_scenarios = 2;
  info->scenario_names = s->names;
  info->flags = HEADSEP_WEIGHTING_ALL_SLOTS;
  if (strncmp(s->mode, "spec-", 5) == 0) {
    const uint32_t d = s->n_features; /* 3: the zero matrices below hold d x d <= 64 floats */
    info->n_scenarios = 0;
    info->flags = 0;
    memset(&s->spec, 0, sizeof s->spec);
    s->spec.struct_size = sizeof s->spec;
    s->spec.input = HEADSEP_INPUT_FEATURES;
    s->spec.d_model = d;
    s->spec.heads = 2;
    s->spec.d_k = s->spec.d_v = 2;
    s->spec.seed = 7;
    if (d * d > 64) return HEADSEP_ERROR;
    if (is(s, "spec-zero-baseline")) s->spec.s_w_q = s->spec.s_w_k = s->spec.s_w_v = s->zero;
    if (is(s, "spec-half-baseline")) s->spec.s_w_q = s->zero;
    if (is(s, "spec-nan-baseline")) {
      s->nan[1] = NAN;
      s->spec.s_w_q = s->nan, s->spec.s_w_k = s->spec.s_w_v = s->zero;
    }
    info->attention = &s->spec;
  }
  return HEADSEP_OK;
}

static void fill(const state* s, const headsep_batch_view* b, double* const* rows, uint32_t slot_rows) {
  for (uint64_t r = 0; r < b->n_reports; ++r) {
    const uint64_t a = b->token_offset[r], e = b->token_offset[r + 1];
    const uint64_t end = is(s, "half-tokens") ? a + (e - a) / 2 : e;
    for (uint32_t h = 0; h < slot_rows; ++h) {
      if (!rows[h] || (is(s, "skip-head") && h == 2) || (is(s, "skip-baseline") && h == 0)) continue;
      for (uint64_t t = a; t < end; ++t) rows[h][t] = 1.0 / (double)(e - a);
    }
  }
}

static void fill_maps(const state* s, const headsep_batch_view* b, double* const* rows) {
  for (uint64_t r = 0; r < b->n_reports; ++r) {
    const uint64_t n = b->token_offset[r + 1] - b->token_offset[r];
    for (uint32_t h = 0; h < 3; ++h)
      for (uint64_t q = 0; q < n; ++q) {
        if (is(s, "maps-skip") && h == 1 && q == 0) continue;
        for (uint64_t k = 0; k < n; ++k) rows[h][b->query_offset[r] + q * n + k] = 1.0 / (double)n;
      }
  }
}

static headsep_status weights(const void* st, const headsep_batch_view* b, uint32_t slot, double* const* rows) {
  const state* s = (const state*)st;
  if (is(s, "print")) {
    printf("careless: garbage on stdout\n");
    fflush(stdout);
    if (write(1, "careless: raw write to fd 1\n", 28) < 0) return HEADSEP_ERROR;
  }
  if (is(s, "exit")) exit(0);
  if (is(s, "abort")) abort();
  if (is(s, "segv")) *(volatile int*)(uintptr_t)0 = 1;
  if (is(s, "huge-error")) {
    const size_t n = 10u << 20;
    char* m = (char*)malloc(n + 1);
    if (!m) return HEADSEP_ERROR;
    memset(m, 'x', n);
    memcpy(m, "bad\x1b[2J\r\nfake line", 18);
    m[n] = 0;
    g_huge = m;
    return HEADSEP_ERROR;
  }
  if (b->query_offset) {
    fill_maps(s, b, rows);
    return HEADSEP_OK;
  }
  if (slot == HEADSEP_SLOT_ALL) {
    fill(s, b, rows, 3); /* slot 0 */
    if (!is(s, "slot0-only")) fill(s, b, rows + 3, 3);
    return HEADSEP_OK;
  }
  fill(s, b, rows, 3);
  return HEADSEP_OK;
}

static void destroy(void* st) {
  free(g_huge);  /* the host read it (last_error) before destroying; LeakSanitizer sees the rest */
  g_huge = NULL;
  free(st);
}

static const headsep_param_spec kParams[] = {{"mode", HEADSEP_PARAM_STRING, "ok", "which mistake to make"}};

HEADSEP_PLUGIN_EXPORT const headsep_plugin_descriptor* headsep_plugin_entry(void) {
  static headsep_plugin_descriptor d;
  d.abi_major = HEADSEP_PLUGIN_ABI_MAJOR;
  d.abi_minor = HEADSEP_PLUGIN_ABI_MINOR;
  d.struct_size = sizeof d;
  d.kind = HEADSEP_KIND_WEIGHTING;
  d.name = "careless-weighting";
  d.version = "0.0.1";
  d.description = "a weighting scheme that makes one careless mistake on request";
  d.n_params = 1;
  d.params = kParams;
  d.last_error = last_error;
  d.create = create;
  d.describe_weighting = describe;
  d.weights = weights;
  d.destroy = destroy;
  snprintf(g_error, sizeof g_error, "careless-weighting failed");
  return &d;
}
