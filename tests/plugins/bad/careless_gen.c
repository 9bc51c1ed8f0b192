/* A careless scenario generator against the raw C ABI (issue 23): parameter `mode` picks one
 * mistake; otherwise random access, `reports` (default 40) reports of 3 tokens, the seed's three
 * feature columns, 2 given heads (so the `table` weighting works) and d_model 4 embeddings.
 *
 *   ok              everything right
 *   feature-half    feature 1 written for the first half of the chunk's tokens only
 *   offset-skip     the last token offset never written
 *   given-nan       report 2's given head1 weight of token 2 is NaN
 *   given-negative  the same, -0.5
 *   given-skip      the given head2 row never written
 *   embedding-nan   report 2's embedding of token 1, component 3, is NaN
 *   embedding-skip  the embeddings' last token never written
 *   print           prints to stdout (printf and write(1)) in every next_chunk
 *   empty           every report has 0 tokens (feature(out, f, 0) and friends for empty chunks)
 *   big             every feature value is 1e308 (contexts overflow) */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "headsep/plugin.h"

static _Thread_local char g_error[256];
static const char* last_error(void) { return g_error; }

typedef struct state {
  char mode[64];
  uint64_t reports;
  const char* features[3];
  const char* scenarios[1];
} state;

static int is(const state* s, const char* m) { return strcmp(s->mode, m) == 0; }

static headsep_status open_(const headsep_param* p, uint32_t n, void** out) {
  state* s = (state*)calloc(1, sizeof *s);
  if (!s) return HEADSEP_ERROR;
  s->reports = 40;
  snprintf(s->mode, sizeof s->mode, "ok");
  for (uint32_t i = 0; i < n; ++i) {
    if (strcmp(p[i].name, "mode") == 0) snprintf(s->mode, sizeof s->mode, "%s", p[i].value);
    if (strcmp(p[i].name, "reports") == 0) s->reports = strtoull(p[i].value, NULL, 10);
  }
  *out = s;
  return HEADSEP_OK;
}

static headsep_status describe(void* st, headsep_schema* schema) {
  state* s = (state*)st;
  s->features[0] = "decision_axis";
  s->features[1] = "evidence_axis";
  s->features[2] = "condition_axis";
  s->scenarios[0] = "alpha";
  memset(schema, 0, sizeof *schema);
  schema->struct_size = sizeof *schema;
  schema->flags = HEADSEP_SCHEMA_RANDOM_ACCESS | HEADSEP_SCHEMA_NAMES_SCENARIOS;
  schema->n_features = 3;
  schema->feature_names = s->features;
  schema->n_scenarios = 1;
  schema->scenario_names = s->scenarios;
  schema->given_heads = 2;
  schema->total_reports = s->reports;
  schema->d_model = 4;
  return HEADSEP_OK;
}

static headsep_status next_chunk(void* st, uint64_t index, uint64_t max, headsep_chunk_out* out) {
  const state* s = (const state*)st;
  const uint64_t first = index * max;
  uint64_t n = first < s->reports ? s->reports - first : 0;
  if (n > max) n = max;
  if (n == 0) return HEADSEP_END;
  if (is(s, "print")) {
    printf("careless: garbage from next_chunk\n");
    fflush(stdout);
    if (write(1, "careless: raw write to fd 1\n", 28) < 0) return HEADSEP_ERROR;
  }
  const uint64_t per = is(s, "empty") ? 0 : 3, T = per * n;
  uint64_t* off = out->token_offsets(out, n);
  if (!off) return HEADSEP_ERROR;
  for (uint64_t r = 0; r <= n; ++r)
    if (!(is(s, "offset-skip") && r == n)) off[r] = per * r;
  if (out->scenario(out, "alpha", 5)) return HEADSEP_ERROR;
  for (uint32_t f = 0; f < 3; ++f) {
    double* x = out->feature(out, f, T);
    if (!x) return HEADSEP_ERROR;
    const uint64_t end = is(s, "feature-half") && f == 1 ? T / 2 : T;
    for (uint64_t t = 0; t < end; ++t)
      x[t] = is(s, "big") ? 1e308 : 0.1 * (double)((first + t / 3 + f * 3 + t % 3) % 7) + (t % 3 == f ? 1.0 : 0.0);
  }
  for (uint32_t row = 0; row < 3; ++row) {
    double* w = out->given_weights(out, 0, row, T);
    if (!w) return HEADSEP_ERROR;
    if (is(s, "given-skip") && row == 2) continue;
    for (uint64_t t = 0; t < T; ++t) w[t] = (t % 3 == row) ? 0.5 : 0.25;
    if (row == 1 && first <= 2 && 2 < first + n) {
      if (is(s, "given-nan")) w[3 * (2 - first) + 1] = NAN;
      if (is(s, "given-negative")) w[3 * (2 - first) + 1] = -0.5;
    }
  }
  float* e = out->embeddings(out, T);
  if (!e) return HEADSEP_ERROR;
  const uint64_t e_end = is(s, "embedding-skip") && T ? (T - 1) * 4 : T * 4;
  for (uint64_t i = 0; i < e_end; ++i) e[i] = (float)((i * 7 + first) % 11) * 0.1f;
  if (is(s, "embedding-nan") && first <= 2 && 2 < first + n) e[(3 * (2 - first) + 0) * 4 + 2] = NAN;
  return HEADSEP_OK;
}

static void close_(void* st) { free(st); }

static const headsep_param_spec kParams[] = {
    {"mode", HEADSEP_PARAM_STRING, "ok", "which mistake to make"},
    {"reports", HEADSEP_PARAM_INT, "40", "number of reports"},
};

HEADSEP_PLUGIN_EXPORT const headsep_plugin_descriptor* headsep_plugin_entry(void) {
  static headsep_plugin_descriptor d;
  d.abi_major = HEADSEP_PLUGIN_ABI_MAJOR;
  d.abi_minor = HEADSEP_PLUGIN_ABI_MINOR;
  d.struct_size = sizeof d;
  d.kind = HEADSEP_KIND_SCENARIO;
  d.name = "careless-gen";
  d.version = "0.0.1";
  d.description = "a scenario generator that makes one careless mistake on request \x1b[2J(ESC: shown escaped)";
  d.n_params = 2;
  d.params = kParams;
  d.last_error = last_error;
  d.open = open_;
  d.describe = describe;
  d.next_chunk = next_chunk;
  d.close = close_;
  snprintf(g_error, sizeof g_error, "careless-gen failed");
  return &d;
}
