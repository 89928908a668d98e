#pragma once
// Recipes: which format each linear layer of a float checkpoint is quantized
// to. A recipe is an ordered list of rules plus a default; the first rule whose
// glob matches the layer prefix (e.g. "blocks.3.mlp.fc1") decides.
//
// Glob syntax (whole prefix must match, case-sensitive):
//   *      any run of characters, dots included: "blocks.*.mlp.*" matches
//          "blocks.12.mlp.fc1", and "*.mlp.fc2" also matches
//          "token_refiner.blocks.0.mlp.fc2"
//   ?      exactly one character
//   {a,b}  one of the comma-separated alternatives (no nesting)
//   [...]  not special: matched literally
//
// Command line: --rule PATTERN=FORMAT[:key=value,...], e.g.
//   --rule '*.mlp.*=nvfp4' --rule '*.attn.*=int8_tensorwise:convrot=true,convrot_groupsize=64,fallback=keep'
// JSON file: {"rules": [{"match": glob, "format": name, key: value, ...}],
//             "default": "keep" | name | {"format": name, key: value, ...}}
// FORMAT "keep" leaves the layer in its source precision. "fallback=keep" keeps
// a layer the format cannot hold (its quantizer or validator rejects the
// shape) instead of failing. Format names and parameters are checked against
// the format table: the record's marker parameters (`defaults`, written to the
// marker), its quantizer-only `quantize_options` (not written), and
// "full_precision_matrix_mult" for every format.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace mixq {

struct FormatTraits;

struct RecipeRule {
  std::string match = "*";
  const FormatTraits* format = nullptr;  // nullptr means "keep"
  // Parameters given by the rule (validated, defaults NOT applied).
  nlohmann::json params = nlohmann::json::object();
  bool fallback_keep = false;
  std::string origin;  // "--rule 2", "recipes/x.json rule 1", for messages

  bool keeps() const { return format == nullptr; }
  // "nvfp4", "int8_tensorwise{convrot=true}", "keep"
  std::string describe() const;
};

struct Recipe {
  std::vector<RecipeRule> rules;
  RecipeRule fallback;  // used when no rule matches (default: keep)

  // The rule that decides `prefix` (the default rule when none matches).
  const RecipeRule& decide(std::string_view prefix) const;
};

// Whole-string glob match (syntax above).
bool glob_match(std::string_view pattern, std::string_view text);

// Parses one --rule value; throws UsageError naming the rule on bad syntax, an
// unknown format (listing the valid ones) or an unknown parameter (listing the
// format's parameters).
RecipeRule parse_rule(std::string_view text, std::string origin = "--rule");
// Parses a recipe object; throws Error naming `origin` and the rule.
Recipe parse_recipe(const nlohmann::json& json, const std::string& origin);
// Reads and parses a recipe file.
Recipe load_recipe(const std::string& path);

// Names accepted as a rule's format: every format whose record can quantize,
// then "keep".
std::vector<std::string> quantizable_format_names();

}  // namespace mixq
