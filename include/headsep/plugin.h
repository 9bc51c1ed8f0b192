/* headsep — the plugin ABI: scenario generators and weighting schemes as shared libraries.
 *
 * Pure C (C99 and C++). A plugin exports one function,
 *
 *     const headsep_plugin_descriptor* headsep_plugin_entry(void);
 *
 * returning a pointer to a descriptor with static storage duration. The host reads abi_major,
 * abi_minor and struct_size first and refuses a different abi_major before it reads or calls
 * anything else. A newer abi_minor is accepted: the descriptor only grows by appending fields,
 * and fields at or beyond struct_size are treated as absent (NULL / 0). The same rule holds
 * for every struct below that starts with struct_size.
 *
 * Names (docs/PLUGINS.md, "Names and limits", has the same rules; the host enforces them):
 *  - plugin names [a-z0-9_-], parameter names [A-Za-z0-9_-]: 1..64 bytes, no '.' (it separates
 *    NAME.key in `-p NAME.key=value`); "scenario" and "weighting" are reserved plugin names;
 *  - feature and scenario names: valid UTF-8, non-empty, at most 4096 bytes, unique in their list;
 *  - report ids and token names: valid UTF-8 (may be empty).
 *
 * Rules for every function pointer (docs/PLUGINS.md has the full contract):
 *  - Only C types cross: fixed-width integers, doubles, pointers with lengths, opaque state.
 *    No C++ exception may leave a plugin function (the C++ SDK catches them all).
 *  - Errors: functions returning headsep_status return HEADSEP_OK on success; on any other
 *    value the host calls last_error() on the same thread for the message.
 *  - Memory: what a plugin allocates, the plugin frees (close/destroy); what the host passes
 *    in stays owned by the host and is valid only for the duration of the call unless said.
 *  - Threads: each field says whether it may be called from several threads at once.
 *    The host loads every library and calls open/create before any worker thread starts.
 */
#ifndef HEADSEP_PLUGIN_H
#define HEADSEP_PLUGIN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HEADSEP_PLUGIN_ABI_MAJOR 1
#define HEADSEP_PLUGIN_ABI_MINOR 3
/** Name of the one symbol a plugin exports. */
#define HEADSEP_PLUGIN_ENTRY_SYMBOL "headsep_plugin_entry"

#if defined(_WIN32)
#define HEADSEP_PLUGIN_EXPORT __declspec(dllexport)
#else
#define HEADSEP_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/** Return codes. */
typedef int32_t headsep_status;
#define HEADSEP_OK 0
#define HEADSEP_ERROR 1 /**< failed; last_error() says why */
#define HEADSEP_END 2   /**< next_chunk only: no report left (not an error) */
/** open/create only: a parameter's value is refused (out of range, unknown word); last_error()
 *  says which. The host reports it as a usage error (exit status 2, as for a value that is not
 *  of the declared type). Hosts before it treat it as HEADSEP_ERROR. */
#define HEADSEP_ERROR_PARAM 3

typedef enum headsep_plugin_kind {
  HEADSEP_KIND_SCENARIO = 1, /**< scenario generator: produces reports */
  HEADSEP_KIND_WEIGHTING = 2 /**< weighting scheme: weights tokens per head */
} headsep_plugin_kind;

/** Parameter types. The host validates every value before open/create and passes it as text
 *  in canonical form: int = decimal int64, float = finite double (shortest round-trip form),
 *  bool = "true" / "false", string = as given. Lists are strings, comma-separated. */
typedef enum headsep_param_type {
  HEADSEP_PARAM_STRING = 1,
  HEADSEP_PARAM_INT = 2,
  HEADSEP_PARAM_FLOAT = 3,
  HEADSEP_PARAM_BOOL = 4
} headsep_param_type;

/** One entry of a plugin's parameter table (static storage, owned by the plugin). */
typedef struct headsep_param_spec {
  const char* name;          /**< required; [A-Za-z0-9_-]{1,64}, unique in the table */
  uint32_t type;             /**< required; a headsep_param_type */
  const char* default_value; /**< NULL = the parameter is required (no default) */
  const char* help;          /**< may be NULL */
} headsep_param_spec;

/** A parameter value handed to open/create. The host passes every declared parameter exactly
 *  once, in table order, value given by the user or else the default. Host-owned, valid
 *  during the call only: copy what you keep. */
typedef struct headsep_param {
  const char* name;
  const char* value;
} headsep_param;

/** Schema flags. */
#define HEADSEP_SCHEMA_NAMES_SCENARIOS 1u /**< the data names the scenarios of each report (e.g. the seed CSV) */
#define HEADSEP_SCHEMA_RANDOM_ACCESS 2u   /**< next_chunk may be called concurrently for distinct chunk indices */

/** What a scenario generator produces. Returned by describe(): memory owned by the plugin
 *  state, valid until close(). Passed to a weighting's create(): host-owned, valid during the
 *  call only. */
typedef struct headsep_schema {
  uint32_t struct_size;               /**< sizeof(headsep_schema) as the writer knows it */
  uint32_t flags;                     /**< HEADSEP_SCHEMA_* */
  uint32_t n_features;
  const char* const* feature_names;   /**< [n_features] UTF-8, NUL-terminated, non-empty, unique */
  uint32_t n_scenarios;
  const char* const* scenario_names;  /**< [n_scenarios] UTF-8, non-empty, unique: scenarios known up
                                           front (random-access generators must list every
                                           scenario they use here) */
  uint32_t given_heads;               /**< N when the data carries single + N head weights, else 0 */
  uint64_t total_reports;             /**< number of reports when known in advance (progress), else 0 */
  /* ---- ABI 1.1 ---- */
  uint32_t d_model;                   /**< width of the float32 token embeddings every chunk carries
                                           (headsep_chunk_out.embeddings), 0 = none */
} headsep_schema;

/** Fields a chunk may carry, for headsep_chunk_out callbacks. */
struct headsep_chunk_out;
typedef struct headsep_chunk_out headsep_chunk_out;

/** Where next_chunk writes one chunk of reports. Host-owned: every buffer a callback returns
 *  belongs to this chunk (so concurrent calls never share memory), stays valid until
 *  next_chunk returns, is NOT zeroed, and must be written completely (the host fills it with a
 *  marker first and refuses the chunk, naming the element, if any is left unwritten). A request
 *  for 0 values returns a non-NULL pointer that must not be written. A callback returning
 *  NULL or non-zero means the host refused (bad index, out of memory): return HEADSEP_ERROR.
 *  Callbacks are only valid during the next_chunk call that received `out`. */
struct headsep_chunk_out {
  uint32_t struct_size; /**< set by the host */
  uint32_t reserved;
  /** Required, once: storage for n_reports + 1 token offsets. Report r owns tokens
   *  [off[r], off[r+1]); off[0] must be 0 and the offsets non-decreasing. n_reports >= 1 and
   *  <= max_reports. */
  uint64_t* (*token_offsets)(headsep_chunk_out* out, uint64_t n_reports);
  /** Required for every feature f < schema.n_features: storage for n_tokens doubles
   *  (n_tokens = off[n_reports]). */
  double* (*feature)(headsep_chunk_out* out, uint32_t f, uint64_t n_tokens);
  /** Appends a scenario (length-delimited UTF-8, non-empty, at most once per chunk) to the
   *  chunk's scenario list: every report of the chunk is evaluated under the same list, in this
   *  order. Optional: no call = the weighting scheme's own scenarios. The host copies the bytes. */
  int32_t (*scenario)(headsep_chunk_out* out, const char* name, uint64_t len);
  /** When schema.given_heads = N > 0, required for every scenario slot j of the chunk and row
   *  h = 0..N (0 = single-head baseline): storage for n_tokens doubles. */
  double* (*given_weights)(headsep_chunk_out* out, uint32_t slot, uint32_t row, uint64_t n_tokens);
  /** Optional: appends a report id, UTF-8 (all n_reports of them, or none = synthetic "#<index>"). Host copies. */
  int32_t (*report_id)(headsep_chunk_out* out, const char* id, uint64_t len);
  /** Optional: appends a token name, UTF-8 (all n_tokens of them, or none). Host copies. */
  int32_t (*token_name)(headsep_chunk_out* out, const char* name, uint64_t len);
  /** Set by the plugin: input rows that produced this chunk (0 if not row-based). */
  uint64_t source_rows;
  /** Set by sequential plugins on every call, HEADSEP_END included: input rows read so far,
   *  skipped reports included (0 if not row-based). */
  uint64_t rows_read;
  /* ---- ABI 1.1 (present when struct_size covers it; hosts 1.1+ always set it) ---- */
  /** Required, once, when schema.d_model > 0: storage for n_tokens * d_model floats, the token
   *  embeddings row-major [token][d_model] (so attention reads them without a transpose). */
  float* (*embeddings)(headsep_chunk_out* out, uint64_t n_tokens);
};

/** A chunk of reports as a weighting scheme sees it. Host-owned, read-only, valid during the
 *  weights() call only. */
typedef struct headsep_batch_view {
  uint32_t struct_size;
  uint32_t n_features;
  uint64_t first_report;            /**< global index of report 0 */
  uint64_t n_reports;
  uint64_t n_tokens;
  const uint64_t* token_offset;     /**< [n_reports + 1] */
  const double* const* features;    /**< [n_features] -> [n_tokens], order of the schema */
  uint32_t n_scenarios;             /**< the chunk's data-named scenarios (0 if none) */
  uint32_t n_given_rows;            /**< n_scenarios * (given_heads + 1), or 0 */
  const uint32_t* scenarios;        /**< [n_scenarios] indices into the schema's scenario names */
  const double* const* given_weights; /**< [n_given_rows] -> [n_tokens]: row j*(given_heads+1)+h */
  /* ---- ABI 1.1 ---- */
  uint32_t d_model;                 /**< embedding width (schema.d_model), 0 = none */
  uint32_t reserved;
  const float* embeddings;          /**< [n_tokens][d_model] row-major, NULL when d_model = 0 */
  /** Per-query layout only (else NULL): [n_reports + 1]; report r of n tokens owns the n x n
   *  block [query_offset[r], query_offset[r+1]) of every weight row, query-major (row q = the
   *  weights query q gives to keys 0..n-1). */
  const uint64_t* query_offset;
} headsep_batch_view;

/** Weight layouts (headsep::WeightBlock::Layout). ABI 1.0 hosts accept per_token only. */
#define HEADSEP_LAYOUT_PER_TOKEN 0u
/** ABI 1.1: explicit attention maps. weights() fills, per report r of n tokens, an n x n block
 *  (query-major, each query row a distribution: finite, >= 0, summing to 1 within 1e-3) at
 *  batch.query_offset[r] of every row; for schemes that are not QKV (a previous-token head, a
 *  fixed positional pattern). The host computes the attention metrics from them, with the
 *  value vectors V = X (the embeddings, else the feature columns). */
#define HEADSEP_LAYOUT_PER_QUERY 1u

/** ABI 1.1: where an attention scheme's X comes from. */
#define HEADSEP_INPUT_EMBEDDINGS 0u /**< the chunk's embeddings (schema.d_model wide) */
#define HEADSEP_INPUT_FEATURES 1u   /**< the feature columns, in schema order (d_model = n_features) */
/** ABI 1.1: which tokens are queries. */
#define HEADSEP_QUERY_ALL 0u   /**< every token (self-attention); metrics averaged over queries */
#define HEADSEP_QUERY_FIRST 1u
#define HEADSEP_QUERY_LAST 2u
#define HEADSEP_QUERY_INDEX 3u /**< query_index (negative counts from the end), clamped to the report */
/** ABI 1.1: attention masks. */
#define HEADSEP_MASK_NONE 0u
#define HEADSEP_MASK_CAUSAL 1u /**< query q sees keys 0..q */

/** ABI 1.1: a QKV attention scheme, defined by its projections; the host runs it (projections,
 *  scores, softmax, A·V and every metric in its own dispatched kernels), so weights() is not
 *  called. Memory owned by the weighting state, valid until destroy(). Matrices are float32 in
 *  PyTorch's nn.Linear layout (y = x W^T + b, W row-major [out][in]); head h (1-based) owns rows
 *  [(h-1)*d_k, h*d_k) of w_q and w_k and [(h-1)*d_v, h*d_v) of w_v. Bias pointers may be NULL
 *  (zero). The single-head baseline is one head of width d_model with its own s_* projections. */
typedef struct headsep_attention_spec {
  uint32_t struct_size;   /**< sizeof(headsep_attention_spec) as the plugin knows it */
  uint32_t input;         /**< HEADSEP_INPUT_* */
  uint32_t d_model;       /**< width of X: must match the input */
  uint32_t heads;         /**< must equal headsep_weighting_info.heads */
  uint32_t d_k, d_v;      /**< per-head query/key and value widths */
  uint32_t query;         /**< HEADSEP_QUERY_* */
  int32_t query_index;    /**< HEADSEP_QUERY_INDEX only */
  uint32_t mask;          /**< HEADSEP_MASK_* */
  uint32_t reserved;
  /** Either a safetensors file the host reads (layouts and tensor names: docs/SAFETENSORS.md;
   *  its shapes override d_model/d_k/d_v, which must then agree or be 0) ... */
  const char* weights_path;
  /** ... and optionally the baseline's (a 1-head nn.MultiheadAttention state_dict); NULL: the
   *  baseline comes from weights_path when it holds one, else from s_* below, else it is
   *  initialised from seed (docs/ATTENTION.md). */
  const char* baseline_path;
  uint64_t seed;
  /** ... or the matrices themselves (when weights_path is NULL; w_q NULL too = every head
   *  projection initialised from seed, docs/ATTENTION.md): */
  const float *w_q, *b_q;     /**< [heads*d_k][d_model], [heads*d_k] */
  const float *w_k, *b_k;     /**< [heads*d_k][d_model], [heads*d_k] */
  const float *w_v, *b_v;     /**< [heads*d_v][d_model], [heads*d_v] */
  const float *w_o, *b_o;     /**< optional output projection [d_model][heads*d_v], [d_model] */
  const float *s_w_q, *s_b_q; /**< baseline [d_model][d_model], [d_model]; NULL = seeded */
  const float *s_w_k, *s_b_k;
  const float *s_w_v, *s_b_v;
} headsep_attention_spec;

/** What a weighting scheme computes. Returned by describe_weighting(): owned by the state,
 *  valid until destroy(). */
typedef struct headsep_weighting_info {
  uint32_t struct_size;
  uint32_t heads;                    /**< N >= 1 */
  uint32_t layout;                   /**< HEADSEP_LAYOUT_* */
  uint32_t n_scenarios;              /**< the scheme's own scenarios (head designs); 0 = none */
  const char* const* scenario_names; /**< [n_scenarios] UTF-8, non-empty, unique */
  /* ---- ABI 1.1 ---- */
  /** Optional: NULL = weights() computes the weights. Else an array of max(1, n_scenarios)
   *  attention schemes, one per own scenario (layout must be per-token: it is ignored). */
  const headsep_attention_spec* attention;
  /* ---- ABI 1.2 ---- */
  /** HEADSEP_WEIGHTING_* bits. Each is a promise the host may use or ignore: bits a host does not
   *  know are ignored. */
  uint32_t flags;
} headsep_weighting_info;

/** The single-head baseline (rows[0] of weights()) is the same for every scenario slot, e.g. one
 *  softmax that no head design changes. The host then asks for it once per batch, in the call for
 *  slot 0, and passes rows[0] = NULL in the calls for other slots of that batch (it reuses slot 0's
 *  row, and the baseline's contexts). Per-token layout only; ignored for attention specs. */
#define HEADSEP_WEIGHTING_SHARED_BASELINE 1u
/** ABI 1.3: weights() also accepts slot = HEADSEP_SLOT_ALL and then fills every scenario slot of
 *  the chunk in one call (e.g. reading the features once for all head designs). rows then holds
 *  n_slots x (heads + 1) pointers, slot-major (slot s's row h at rows[s * (heads + 1) + h]), where
 *  n_slots is the scheme's n_scenarios, or the chunk's n_scenarios when it has none (at least 1);
 *  with HEADSEP_WEIGHTING_SHARED_BASELINE, rows[s * (heads + 1)] is NULL for s > 0. The host may
 *  still call weights() one slot at a time (e.g. in f32), so a scheme must support both. */
#define HEADSEP_WEIGHTING_ALL_SLOTS 2u
/** The `slot` of a weights() call that fills every slot (HEADSEP_WEIGHTING_ALL_SLOTS). */
#define HEADSEP_SLOT_ALL 0xFFFFFFFFu

/** The descriptor returned by headsep_plugin_entry(). Static storage, owned by the plugin.
 *  Fields of the other kind are NULL. */
typedef struct headsep_plugin_descriptor {
  /* ---- ABI 1.0: read first, in this order ---- */
  uint32_t abi_major;   /**< required: HEADSEP_PLUGIN_ABI_MAJOR the plugin was built with */
  uint32_t abi_minor;   /**< required: HEADSEP_PLUGIN_ABI_MINOR */
  uint32_t struct_size; /**< required: sizeof(headsep_plugin_descriptor) the plugin was built with */
  uint32_t kind;        /**< required: headsep_plugin_kind */
  const char* name;        /**< required: unique plugin name, [a-z0-9_-]{1,64} */
  const char* version;     /**< required: plugin version, e.g. "1.2.0" */
  const char* description; /**< required: one line */
  uint32_t n_params;
  const headsep_param_spec* params; /**< [n_params]; NULL when n_params = 0 */

  /** Required. Message of the last failed call made on the calling thread (thread-local in
   *  the plugin), UTF-8, valid until the next call into the plugin on that thread. Never NULL. */
  const char* (*last_error)(void);

  /* ---- scenario generators (kind = HEADSEP_KIND_SCENARIO) ---- */
  /** Required. Creates a state from validated parameters. Not called concurrently. On entry
   *  *state is NULL for a plugin loaded from a file; for an in-process plugin (registered with
   *  headsep::PluginRegistry::add, no library) it is the registration's user pointer, the
   *  plugin's context, which open() reads and then replaces with its state. */
  headsep_status (*open)(const headsep_param* params, uint32_t n_params, void** state);
  /** Required. Fills *schema (memory owned by the state, valid until close). Called once after open. */
  headsep_status (*describe)(void* state, headsep_schema* schema);
  /** Required. Produces chunk `chunk_index` of at most max_reports reports into `out`.
   *  Returns HEADSEP_OK (a chunk with >= 1 report), HEADSEP_END (no report left) or HEADSEP_ERROR.
   *  Sequential generators: called from one thread at a time with chunk_index 0, 1, 2, ...; a
   *  chunk may hold fewer than max_reports reports (e.g. where the scenario list changes).
   *  With HEADSEP_SCHEMA_RANDOM_ACCESS: chunk i must hold exactly reports [i*max_reports, ...)
   *  (max_reports of them except the last), depend only on (parameters, i, max_reports), and
   *  the function may be called from several threads at once for distinct chunk indices. */
  headsep_status (*next_chunk)(void* state, uint64_t chunk_index, uint64_t max_reports, headsep_chunk_out* out);
  /** Required. Frees the state and everything it owns. */
  void (*close)(void* state);

  /* ---- weighting schemes (kind = HEADSEP_KIND_WEIGHTING) ---- */
  /** Required. Creates a state from validated parameters and the scenario generator's schema
   *  (host-owned, valid during the call only). Not called concurrently. *state on entry: as for
   *  open() (NULL, or an in-process plugin's user pointer). */
  headsep_status (*create)(const headsep_param* params, uint32_t n_params, const headsep_schema* schema, void** state);
  /** Required. Fills *info (owned by the state, valid until destroy). Called once after create. */
  headsep_status (*describe_weighting)(void* state, headsep_weighting_info* info);
  /** Required. Fills the weights of one scenario over a chunk: rows[0] the single-head
   *  baseline, rows[1..heads] the heads, each n_tokens doubles (host-owned, not zeroed: marked
   *  so that an element left unwritten is refused by name; write
   *  all). Weights must be finite and >= 0. rows[0] is NULL (write no baseline) only when the
   *  scheme declared HEADSEP_WEIGHTING_SHARED_BASELINE and slot > 0. `slot` indexes the scheme's own scenarios, or the
   *  chunk's scenarios when it has none (slot 0 when neither exists); HEADSEP_SLOT_ALL (only when
   *  the scheme declared HEADSEP_WEIGHTING_ALL_SLOTS): every slot at once, rows as described there.
   *  MAY BE CALLED FROM SEVERAL THREADS AT ONCE on the same state (distinct batches or slots):
   *  it must not modify the state. */
  headsep_status (*weights)(const void* state, const headsep_batch_view* batch, uint32_t slot, double* const* rows);
  /** Required. Frees the state. */
  void (*destroy)(void* state);
} headsep_plugin_descriptor;

/** The entry point's type. */
typedef const headsep_plugin_descriptor* (*headsep_plugin_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* HEADSEP_PLUGIN_H */
