/* A hostile weighting scheme against the raw C ABI: parameter `mode` picks one mistake in what
 * describe_weighting() declares (docs/PLUGINS.md, "What the host checks"); weights() is uniform.
 *
 *   ok                   2 heads, no own scenarios
 *   heads-max            heads = UINT32_MAX (heads + 1 wraps to 0 in 32 bits)
 *   heads-million        heads = 1,000,000
 *   null-scenarios       n_scenarios 2, scenario_names NULL
 *   null-scenario-entry  scenario_names[1] NULL
 *   dup-scenarios        the same design name twice
 *   bad-utf8-scenario    a design name that is not UTF-8 */
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
  const char* names[2];
} state;

static headsep_status create(const headsep_param* p, uint32_t n, const headsep_schema* schema, void** out) {
  (void)schema;
  state* s = (state*)calloc(1, sizeof *s);
  if (!s) return HEADSEP_ERROR;
  snprintf(s->mode, sizeof s->mode, "ok");
  for (uint32_t i = 0; i < n; ++i)
    if (strcmp(p[i].name, "mode") == 0) snprintf(s->mode, sizeof s->mode, "%s", p[i].value);
  *out = s;
  return HEADSEP_OK;
}

static headsep_status describe(void* st, headsep_weighting_info* info) {
  state* s = (state*)st;
  memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
  info->heads = 2;
  info->layout = HEADSEP_LAYOUT_PER_TOKEN;
  s->names[0] = "design_a";
  s->names[1] = "design_b";
  if (strcmp(s->mode, "heads-max") == 0) info->heads = UINT32_MAX;
  if (strcmp(s->mode, "heads-million") == 0) info->heads = 1000000;
  if (strncmp(s->mode, "null-scenario", 13) == 0 || strcmp(s->mode, "dup-scenarios") == 0 ||
      strcmp(s->mode, "bad-utf8-scenario") == 0) {
    info->n_scenarios = 2;
    info->scenario_names = s->names;
  }
  if (strcmp(s->mode, "null-scenarios") == 0) info->scenario_names = NULL;
  if (strcmp(s->mode, "null-scenario-entry") == 0) s->names[1] = NULL;
  if (strcmp(s->mode, "dup-scenarios") == 0) s->names[1] = "design_a";
  if (strcmp(s->mode, "bad-utf8-scenario") == 0) s->names[1] = "design_\xe2\x82";
  return HEADSEP_OK;
}

static headsep_status weights(const void* st, const headsep_batch_view* b, uint32_t slot, double* const* rows) {
  (void)st, (void)slot;
  for (uint64_t r = 0; r < b->n_reports; ++r) {
    const uint64_t a = b->token_offset[r], e = b->token_offset[r + 1];
    for (uint32_t h = 0; h < 3; ++h)
      for (uint64_t t = a; t < e; ++t) rows[h][t] = 1.0 / (double)(e - a);
  }
  return HEADSEP_OK;
}

static void destroy(void* st) { free(st); }

static const headsep_param_spec kParams[] = {{"mode", HEADSEP_PARAM_STRING, "ok", "which mistake to make"}};

HEADSEP_PLUGIN_EXPORT const headsep_plugin_descriptor* headsep_plugin_entry(void) {
  static headsep_plugin_descriptor d;
  d.abi_major = HEADSEP_PLUGIN_ABI_MAJOR;
  d.abi_minor = HEADSEP_PLUGIN_ABI_MINOR;
  d.struct_size = sizeof d;
  d.kind = HEADSEP_KIND_WEIGHTING;
  d.name = "hostile-weighting";
  d.version = "0.0.1";
  d.description = "a weighting scheme that declares one wrong thing on request";
  d.n_params = 1;
  d.params = kParams;
  d.last_error = last_error;
  d.create = create;
  d.describe_weighting = describe;
  d.weights = weights;
  d.destroy = destroy;
  snprintf(g_error, sizeof g_error, "hostile-weighting failed");
  return &d;
}
