/* Deliberately broken (or unusual) plugins written against the raw C ABI, one per BAD_CASE:
 *   1 no entry symbol          2 ABI major 99           3 weighting without weights()
 *   4 create() fails           5 newer ABI minor with a longer descriptor (must be accepted)
 *   6 an int parameter whose default is "abc"            7 a parameter name with a '.'
 *   8 a plugin name outside [a-z0-9_-] */
#include <stddef.h>
#include <string.h>

#include "headsep/plugin.h"

#pragma GCC diagnostic ignored "-Wunused-function" /* case 1 has no descriptor to use them */

static const char* last_error(void) { return "the model file 'weights.bin' does not exist"; }

static headsep_status create(const headsep_param* p, uint32_t n, const headsep_schema* s, void** state) {
  (void)p, (void)n, (void)s;
#if BAD_CASE == 4
  *state = NULL;
  return HEADSEP_ERROR;
#else
  *state = (void*)1;
  return HEADSEP_OK;
#endif
}
static headsep_status describe(void* state, headsep_weighting_info* info) {
  (void)state;
  memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
  info->heads = 2;
  info->layout = HEADSEP_LAYOUT_PER_TOKEN;
  return HEADSEP_OK;
}
static headsep_status weights(const void* state, const headsep_batch_view* b, uint32_t slot, double* const* rows) {
  (void)state, (void)slot;
  for (uint32_t h = 0; h < 3; ++h)
    for (uint64_t t = 0; t < b->n_tokens; ++t) rows[h][t] = 1.0;
  return HEADSEP_OK;
}
static void destroy(void* state) { (void)state; }

#if BAD_CASE == 1
HEADSEP_PLUGIN_EXPORT int not_the_entry(void) { return 42; }
#else

#if BAD_CASE == 5
/* A plugin built against a future 1.7 header: its descriptor has fields this host does not know. */
typedef struct {
  headsep_plugin_descriptor base;
  void* future_field_1;
  void* future_field_2;
} future_descriptor;
#endif

HEADSEP_PLUGIN_EXPORT const headsep_plugin_descriptor* headsep_plugin_entry(void) {
#if BAD_CASE == 5
  static future_descriptor fd;
  headsep_plugin_descriptor* d = &fd.base;
#else
  static headsep_plugin_descriptor dd;
  headsep_plugin_descriptor* d = &dd;
#endif
  d->abi_major = HEADSEP_PLUGIN_ABI_MAJOR;
  d->abi_minor = HEADSEP_PLUGIN_ABI_MINOR;
  d->struct_size = sizeof(headsep_plugin_descriptor);
  d->kind = HEADSEP_KIND_WEIGHTING;
  d->version = "0.0.1";
  d->description = "a test plugin";
  d->last_error = last_error;
  d->create = create;
  d->describe_weighting = describe;
  d->weights = weights;
  d->destroy = destroy;
#if BAD_CASE == 2
  d->name = "from-the-future";
  d->abi_major = 99;
  d->abi_minor = 3;
#elif BAD_CASE == 3
  d->name = "no-weights";
  d->weights = NULL;
#elif BAD_CASE == 4
  d->name = "create-fails";
#elif BAD_CASE == 6
  static const headsep_param_spec params[] = {{"heads", HEADSEP_PARAM_INT, "2", NULL}, {"reports", HEADSEP_PARAM_INT, "abc", "how many"}};
  d->name = "bad-default";
  d->n_params = 2;
  d->params = params;
#elif BAD_CASE == 7
  static const headsep_param_spec params[] = {{"model.path", HEADSEP_PARAM_STRING, "x", NULL}};
  d->name = "dotted-param";
  d->n_params = 1;
  d->params = params;
#elif BAD_CASE == 8
  d->name = "Bad.Name";
#elif BAD_CASE == 5
  d->name = "newer-minor";
  d->abi_minor = HEADSEP_PLUGIN_ABI_MINOR + 7;
  d->struct_size = sizeof(future_descriptor);
  fd.future_field_1 = (void*)0x1;
  fd.future_field_2 = (void*)0x2;
#endif
  return d;
}
#endif
