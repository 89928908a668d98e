// Layer roles decided from module names (a checkpoint carries no module types).
//
// Tensor parallelism (docs/DISPATCH.md §4, §8.1) uses MiniMax-H3 runtime names,
// which Comfy H3 files already use: `attn.out_proj` and `mlp.fc2` are
// row-parallel (input features split), `attn.qkv_proj` is a fused
// column-parallel layer of 3 logical parts ([q; k; v]) and `mlp.fc1` one of 2
// ([gate; up]). Every other linear is column-parallel.
//
// Diffusers FLUX (FluxTransformer2DModel) names the same pairs differently:
// the attention output projections `attn.to_out.0` and `attn.to_add_out` and
// the feed-forward outputs `ff.net.2` and `ff_context.net.2` are row-parallel,
// fed by column-parallel to_q / to_k / to_v / add_*_proj (whole heads per rank)
// and `ff.net.0.proj` / `ff_context.net.0.proj` (GELU, one part), the pairs
// diffusers' own FluxTransformer2DModel._tp_plan declares. A single block's
// `proj_out` reads cat(attention, MLP) and stays column-parallel (docs/TP.md).
//
// Embeddings: a layer is an embedding when the last component of its prefix is
// exactly one of the embedding-table names of kEmbeddingNames (`embed`,
// `embedding`, `embeddings`, `embed_tokens`, `word_embeddings`,
// `token_embedding`, `tok_embeddings`, `wte`). So `time_embedder.proj_in` or
// `x_embedder` stay linears ("embedder" is not an embedding table). MiniMax-H3 has no quantized
// embeddings; text encoders do. Embeddings are treated as replicated under TP
// (vocab-parallel tables pad their rows, so no split constraint applies).
#include <array>

#include "plan/profile.hpp"

namespace mixq {
namespace {

struct NameRule {
  std::string_view suffix;  // matched on a '.' boundary
  Parallel parallel;
  int parts;
};

constexpr std::array<NameRule, 8> kParallelRules{{
    {"attn.qkv_proj", Parallel::column, 3},
    {"mlp.fc1", Parallel::column, 2},
    {"attn.out_proj", Parallel::row, 1},
    {"mlp.fc2", Parallel::row, 1},
    {"attn.to_out.0", Parallel::row, 1},
    {"attn.to_add_out", Parallel::row, 1},
    {"ff.net.2", Parallel::row, 1},
    {"ff_context.net.2", Parallel::row, 1},
}};

constexpr std::array<std::string_view, 8> kEmbeddingNames{
    "embed", "embedding", "embeddings", "embed_tokens", "word_embeddings", "token_embedding",
    "tok_embeddings", "wte"};

bool ends_with_component(std::string_view prefix, std::string_view suffix) {
  if (prefix == suffix) return true;
  return prefix.size() > suffix.size() && prefix.substr(prefix.size() - suffix.size()) == suffix &&
         prefix[prefix.size() - suffix.size() - 1] == '.';
}

}  // namespace

bool is_embedding_name(std::string_view prefix) {
  const size_t dot = prefix.rfind('.');
  const std::string_view last = dot == std::string_view::npos ? prefix : prefix.substr(dot + 1);
  for (std::string_view name : kEmbeddingNames)
    if (last == name) return true;
  return false;
}

void classify_parallel(std::string_view prefix, Parallel& parallel, int& parts) {
  parallel = Parallel::column;
  parts = 1;
  if (is_embedding_name(prefix)) {
    parallel = Parallel::replicated;
    return;
  }
  for (const NameRule& rule : kParallelRules) {
    if (ends_with_component(prefix, rule.suffix)) {
      parallel = rule.parallel;
      parts = rule.parts;
      return;
    }
  }
}

std::string_view parallel_name(Parallel parallel) {
  switch (parallel) {
    case Parallel::column: return "column";
    case Parallel::row: return "row";
    case Parallel::replicated: return "replicated";
  }
  return "?";
}

}  // namespace mixq
