// Private: the check of a whole chunk a scenario plugin returned (chunk_check.cpp). What each
// callback checks as it is called is in chunk_sink.cpp; random-access chunk counts in scenario.cpp.
#pragma once
#include <string>

#include "headsep/batch.hpp"
#include "host/chunk_sink.hpp"

namespace headsep::host {

/// After next_chunk returned OK with no callback error: token offsets (from 0, never decreasing,
/// within the token limit), every feature written for every token, report ids, token names,
/// embeddings and given weights sized to match, no scenario twice, every feature value finite.
/// Throws PluginError(where + ...) naming the first problem. O(reports + tokens x features):
/// branch-free passes, the exact search only on failure.
void check_chunk(const ChunkSink& sink, const ReportBatch& batch, const Schema& schema, const std::string& where);

}  // namespace headsep::host
