/* Not a plugin: `headsep_plugin_entry` is a data symbol (issue 23, item 10). Calling it crashed
 * every command that scanned its folder; the host must name it and skip it. */
#include "headsep/plugin.h"

HEADSEP_PLUGIN_EXPORT const unsigned char headsep_plugin_entry[16] = {0xff, 0xff, 0xff, 0xff};
