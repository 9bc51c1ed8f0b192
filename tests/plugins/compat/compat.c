/* A plain-C scenario generator and weighting scheme compiled twice by tests/plugins/CMakeLists.txt:
 * once against the saved ABI 1.0 header (tests/plugins/abi10/headsep/plugin.h), once against the
 * current one. Both builds must load and give byte-identical results (ABI 1.x only appends).
 * COMPAT_KIND 1 = scenario generator "compat-reports", 2 = weighting "compat-focus"; 3 = weighting
 * "compat-designs" (ABI 1.2/1.3 flags, current header only). */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "headsep/plugin.h"

#if COMPAT_KIND != 3
static const char* last_error(void) { return "compat plugin error"; }
#endif

#if COMPAT_KIND == 1
/* 200 reports of 1..5 tokens, features from a counter-based hash; random access. */
static const char* kFeatures[3] = {"decision_axis", "evidence_axis", "condition_axis"};
static uint64_t mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
static headsep_status open_(const headsep_param* p, uint32_t n, void** state) {
  (void)p, (void)n;
  *state = NULL;
  return HEADSEP_OK;
}
static headsep_status describe(void* state, headsep_schema* s) {
  (void)state;
  memset(s, 0, sizeof *s);
  s->struct_size = sizeof *s;
  s->flags = HEADSEP_SCHEMA_RANDOM_ACCESS;
  s->n_features = 3;
  s->feature_names = kFeatures;
  s->total_reports = 200;
  return HEADSEP_OK;
}
static headsep_status next_chunk(void* state, uint64_t index, uint64_t max, headsep_chunk_out* out) {
  (void)state;
  uint64_t first = index * max;
  if (first >= 200) return HEADSEP_END;
  uint64_t n = 200 - first < max ? 200 - first : max;
  uint64_t* off = out->token_offsets(out, n);
  if (!off) return HEADSEP_ERROR;
  off[0] = 0;
  for (uint64_t r = 0; r < n; ++r) off[r + 1] = off[r] + 1 + mix(first + r + 1) % 5;
  for (uint32_t f = 0; f < 3; ++f) {
    double* x = out->feature(out, f, off[n]);
    if (!x) return HEADSEP_ERROR;
    for (uint64_t r = 0; r < n; ++r)
      for (uint64_t t = off[r]; t < off[r + 1]; ++t)
        x[t] = (double)(mix((first + r) * 131 + (t - off[r]) * 7 + f) % 19) / 10.0;
  }
  return HEADSEP_OK;
}
static void close_(void* state) { (void)state; }
static const headsep_plugin_descriptor kDescriptor = {
    HEADSEP_PLUGIN_ABI_MAJOR, HEADSEP_PLUGIN_ABI_MINOR, sizeof(headsep_plugin_descriptor), HEADSEP_KIND_SCENARIO,
    "compat-reports", "1.0.0", "ABI compatibility test generator", 0, NULL, last_error,
    open_, describe, next_chunk, close_, NULL, NULL, NULL, NULL};
#else
/* Weightings. Kind 2, "compat-focus": head 1 favours the first token, head 2 the last, the
 * baseline is uniform (per-token weights). Kind 3, "compat-designs" (current header only): the
 * same weights under two own scenarios, "first_last" and "last_first" (heads swapped). Built twice:
 * with COMPAT_SHARED=1 it declares HEADSEP_WEIGHTING_SHARED_BASELINE and fails unless the host
 * passes rows[0] == NULL exactly for slot > 0; with COMPAT_SHARED=0 it writes every row. With
 * COMPAT_ALL=1 it also declares HEADSEP_WEIGHTING_ALL_SLOTS and (a test fixture only: the ABI
 * allows both) fails unless the host asks for every slot at once, with the baseline rows NULL
 * exactly where SHARED_BASELINE says. */
#ifndef COMPAT_ALL
#define COMPAT_ALL 0
#endif
#if COMPAT_KIND == 3
static const char* kDesigns[2] = {"first_last", "last_first"};
static const char* last_error(void) {
  return COMPAT_ALL ? "the host did not ask for every slot at once with the rows HEADSEP_WEIGHTING_ALL_SLOTS describes"
                    : "the host broke the shared-baseline contract (rows[0] must be NULL exactly for slot > 0)";
}
#endif
static headsep_status create(const headsep_param* p, uint32_t n, const headsep_schema* s, void** state) {
  (void)p, (void)n, (void)s;
  *state = NULL;
  return HEADSEP_OK;
}
static headsep_status describe_w(void* state, headsep_weighting_info* info) {
  (void)state;
  memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
  info->heads = 2;
  info->layout = HEADSEP_LAYOUT_PER_TOKEN;
#if COMPAT_KIND == 3
  info->n_scenarios = 2;
  info->scenario_names = kDesigns;
  info->flags = (COMPAT_SHARED ? HEADSEP_WEIGHTING_SHARED_BASELINE : 0u) | (COMPAT_ALL ? HEADSEP_WEIGHTING_ALL_SLOTS : 0u);
#endif
  return HEADSEP_OK;
}
static headsep_status one_slot(const headsep_batch_view* b, uint32_t slot, double* const* rows) {
  double* first = rows[slot ? 2 : 1]; /* kind 2 has one slot */
  double* last = rows[slot ? 1 : 2];
  for (uint64_t r = 0; r < b->n_reports; ++r) {
    uint64_t t0 = b->token_offset[r], t1 = b->token_offset[r + 1], n = t1 - t0;
    double z1 = 0, z2 = 0;
    for (uint64_t t = t0; t < t1; ++t) z1 += exp(-(double)(t - t0)), z2 += exp(-(double)(t1 - 1 - t));
    for (uint64_t t = t0; t < t1; ++t) {
      if (rows[0]) rows[0][t] = 1.0 / (double)n;
      first[t] = exp(-(double)(t - t0)) / z1;
      last[t] = exp(-(double)(t1 - 1 - t)) / z2;
    }
  }
  return HEADSEP_OK;
}
static headsep_status weights(const void* state, const headsep_batch_view* b, uint32_t slot, double* const* rows) {
  (void)state;
#if COMPAT_KIND == 3 && COMPAT_ALL
  if (slot != HEADSEP_SLOT_ALL || !rows[0] || (rows[3] == NULL) != (COMPAT_SHARED != 0)) return HEADSEP_ERROR;
  if (one_slot(b, 0, rows) != HEADSEP_OK) return HEADSEP_ERROR;
  return one_slot(b, 1, rows + 3);
#else
#if COMPAT_KIND == 3
  if (COMPAT_SHARED ? (slot == 0) != (rows[0] != NULL) : rows[0] == NULL) return HEADSEP_ERROR;
#endif
  return one_slot(b, slot, rows);
#endif
}
static void destroy(void* state) { (void)state; }
static const headsep_plugin_descriptor kDescriptor = {
    HEADSEP_PLUGIN_ABI_MAJOR, HEADSEP_PLUGIN_ABI_MINOR, sizeof(headsep_plugin_descriptor), HEADSEP_KIND_WEIGHTING,
#if COMPAT_KIND == 3
    "compat-designs", "1.0.0", "ABI 1.2 shared-baseline test weighting",
#else
    "compat-focus", "1.0.0", "ABI compatibility test weighting",
#endif
    0, NULL, last_error, NULL, NULL, NULL, NULL, create, describe_w, weights, destroy};
#endif

HEADSEP_PLUGIN_EXPORT const headsep_plugin_descriptor* headsep_plugin_entry(void) { return &kDescriptor; }
