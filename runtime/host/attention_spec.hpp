// Private: ABI 1.1 attention specs -> AttentionPlan (see attention_spec.cpp).
#pragma once
#include <memory>
#include <string>

#include "headsep/attention.hpp"
#include "headsep/batch.hpp"
#include "headsep/plugin.h"
#include "headsep/plugin_host.hpp"

namespace headsep {

struct AttentionSpecPlan {
  std::shared_ptr<const AttentionPlan> plan;
  bool reads_features = false;  ///< X = feature columns (else the embeddings)
};

/// Checks one spec against the schema and builds its plan: weights from the spec's safetensors
/// file, its matrices, or its seed; the baseline from the file, the s_* matrices, or the seed.
/// Throws PluginError naming `label` (the plugin) and the spec's index.
AttentionSpecPlan plan_from_spec(const headsep_attention_spec* spec, const Schema& schema, std::uint32_t heads,
                                 const std::string& label, std::uint32_t scenario);

}  // namespace headsep
