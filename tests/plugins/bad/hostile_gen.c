/* A hostile scenario generator against the raw C ABI: parameter `mode` picks one mistake
 * (docs/PLUGINS.md, "What the host checks"); `reports` (default 100) is the number of reports.
 * Every report has 3 tokens and the seed's three feature columns, so the built-in weightings and
 * the default axes work with it.
 *
 *   ok                   random access, total_reports declared, everything right
 *   short-chunks         random access: every chunk holds half the reports it must
 *   end-early            random access: END at chunk 1, data again from chunk 2
 *   end-early-unknown    the same without total_reports
 *   short-then-more      random access, no total_reports: a short chunk 0, then full chunks
 *   past-total           random access: data past the declared total_reports
 *   seq-short            sequential: END after half the declared total_reports
 *   null-features        feature_names NULL, n_features 3
 *   null-feature-entry   feature_names[1] NULL
 *   empty-feature        feature_names[1] ""
 *   dup-features         a feature listed twice
 *   bad-utf8-feature     a feature name that is not UTF-8
 *   null-scenarios       scenario_names NULL, n_scenarios 2
 *   null-scenario-entry  scenario_names[1] NULL
 *   dup-scenarios        a scenario listed twice in the schema
 *   dup-chunk-scenarios  every chunk names the same scenario twice
 *   bad-utf8-scenario    sequential: chunks name a scenario that is not UTF-8
 *   bad-utf8-id          a report id that is not UTF-8
 *   many-features        n_features = UINT32_MAX
 *   given-heads-max      given_heads = UINT32_MAX
 *   stale-out            sequential: keeps chunk 0's `out` and writes through it during chunk 1
 *   nan-feature          report 3, token 2, evidence_axis = NaN */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headsep/plugin.h"

static _Thread_local char g_error[256];
static const char* last_error(void) { return g_error; }

typedef struct state {
  char mode[64];
  uint64_t reports;
  const char* features[3];
  const char* scenarios[2];
  headsep_schema schema;
} state;

static int is(const state* s, const char* m) { return strcmp(s->mode, m) == 0; }

static headsep_status open_(const headsep_param* p, uint32_t n, void** out) {
  state* s = (state*)calloc(1, sizeof *s);
  if (!s) return HEADSEP_ERROR;
  s->reports = 100;
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
  s->scenarios[1] = "beta";
  memset(schema, 0, sizeof *schema);
  schema->struct_size = sizeof *schema;
  schema->flags = HEADSEP_SCHEMA_RANDOM_ACCESS;
  schema->n_features = 3;
  schema->feature_names = s->features;
  schema->total_reports = s->reports;
  if (is(s, "end-early-unknown") || is(s, "short-then-more")) schema->total_reports = 0;
  if (is(s, "seq-short") || is(s, "stale-out")) schema->flags = 0;
  if (is(s, "null-features")) schema->feature_names = NULL;
  if (is(s, "null-feature-entry")) s->features[1] = NULL;
  if (is(s, "empty-feature")) s->features[1] = "";
  if (is(s, "dup-features")) s->features[2] = "decision_axis";
  if (is(s, "bad-utf8-feature")) s->features[1] = "evidence_\xff\xfe";
  if (is(s, "many-features")) schema->n_features = UINT32_MAX;
  if (is(s, "given-heads-max")) schema->given_heads = UINT32_MAX;
  if (is(s, "null-scenarios") || is(s, "null-scenario-entry") || is(s, "dup-scenarios")) {
    schema->n_scenarios = 2;
    schema->scenario_names = s->scenarios;
    if (is(s, "null-scenarios")) schema->scenario_names = NULL;
    if (is(s, "null-scenario-entry")) s->scenarios[1] = NULL;
    if (is(s, "dup-scenarios")) s->scenarios[1] = "alpha";
  }
  if (is(s, "dup-chunk-scenarios")) {
    schema->n_scenarios = 1;
    schema->scenario_names = s->scenarios;
    schema->flags |= HEADSEP_SCHEMA_NAMES_SCENARIOS;
  }
  if (is(s, "bad-utf8-scenario")) schema->flags = HEADSEP_SCHEMA_NAMES_SCENARIOS; /* sequential, named by chunks */
  return HEADSEP_OK;
}

static headsep_chunk_out* g_kept; /* stale-out: chunk 0's `out`, kept against the rules */

static headsep_status next_chunk(void* st, uint64_t index, uint64_t max, headsep_chunk_out* out) {
  const state* s = (const state*)st;
  uint64_t total = s->reports;
  if (is(s, "past-total")) total = 2 * s->reports;
  uint64_t first = index * max;
  uint64_t n = first < total ? total - first : 0;
  if (n > max) n = max;
  if (is(s, "short-chunks") && n > 1) n /= 2;
  if ((is(s, "end-early") || is(s, "end-early-unknown")) && index == 1) n = 0;
  if (is(s, "seq-short")) {
    /* sequential: chunk_index counts calls; emit half the total in chunks of max */
    first = index * max;
    n = first < total / 2 ? total / 2 - first : 0;
    if (n > max) n = max;
  }
  if (is(s, "short-then-more") && index == 0 && max > 1) n = max / 2;
  if (is(s, "short-then-more") && index > 0) n = max; /* never ends: the host must stop it */
  if (is(s, "stale-out")) {
    if (index == 0) g_kept = out;
    else if (g_kept) {
      double* old = g_kept->feature(g_kept, 0, 3); /* chunk 0's call is long gone */
      if (old) old[0] = old[1] = old[2] = 42.0;
    }
  }
  if (n == 0) return HEADSEP_END;

  uint64_t* off = out->token_offsets(out, n);
  if (!off) return HEADSEP_ERROR;
  for (uint64_t r = 0; r <= n; ++r) off[r] = 3 * r;
  for (uint32_t f = 0; f < 3; ++f) {
    double* x = out->feature(out, f, 3 * n);
    if (!x) return HEADSEP_ERROR;
    for (uint64_t t = 0; t < 3 * n; ++t) x[t] = 0.1 * (double)((first + t / 3 + f * 3 + t % 3) % 7) + (t % 3 == f ? 1.0 : 0.0);
    if (is(s, "nan-feature") && f == 1 && first <= 3 && 3 < first + n) x[3 * (3 - first) + 1] = NAN;
  }
  if (is(s, "dup-chunk-scenarios")) {
    if (out->scenario(out, "alpha", 5) || out->scenario(out, "alpha", 5)) return HEADSEP_ERROR;
  }
  if (is(s, "bad-utf8-scenario") && out->scenario(out, "caf\xc3", 4)) return HEADSEP_ERROR;
  if (is(s, "bad-utf8-id")) {
    for (uint64_t r = 0; r < n; ++r) {
      char id[32];
      int len = snprintf(id, sizeof id, "r%llu", (unsigned long long)(first + r));
      if (first + r == 5) id[len++] = (char)0xff;
      if (out->report_id(out, id, (uint64_t)len)) return HEADSEP_ERROR;
    }
  }
  return HEADSEP_OK;
}

static void close_(void* st) { free(st); }

static const headsep_param_spec kParams[] = {
    {"mode", HEADSEP_PARAM_STRING, "ok", "which mistake to make"},
    {"reports", HEADSEP_PARAM_INT, "100", "number of reports"},
};

HEADSEP_PLUGIN_EXPORT const headsep_plugin_descriptor* headsep_plugin_entry(void) {
  static headsep_plugin_descriptor d;
  d.abi_major = HEADSEP_PLUGIN_ABI_MAJOR;
  d.abi_minor = HEADSEP_PLUGIN_ABI_MINOR;
  d.struct_size = sizeof d;
  d.kind = HEADSEP_KIND_SCENARIO;
  d.name = "hostile-gen";
  d.version = "0.0.1";
  d.description = "a scenario generator that makes one mistake on request";
  d.n_params = 2;
  d.params = kParams;
  d.last_error = last_error;
  d.open = open_;
  d.describe = describe;
  d.next_chunk = next_chunk;
  d.close = close_;
  snprintf(g_error, sizeof g_error, "hostile-gen failed");
  return &d;
}
