// Recipe parsing and glob matching (see include/mixq/recipe.hpp for the syntax).
#include "mixq/recipe.hpp"

#include <charconv>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "io/file_checks.hpp"
#include "io/strict_json.hpp"
#include "mixq/error.hpp"
#include "mixq/format.hpp"

namespace mixq {

// Real recipes are a few KiB.
constexpr uint64_t kMaxRecipeBytes = 16u << 20;

namespace {

constexpr std::string_view kKeep = "keep";
constexpr std::string_view kFallback = "fallback";
// Read by ComfyUI and SGLang for every format (docs/DISPATCH.md §1.3).
constexpr std::string_view kFullPrecision = "full_precision_matrix_mult";

// '*' and '?' only; iterative matcher with single-star backtracking.
bool wildcard_match(std::string_view p, std::string_view t) {
  size_t pi = 0, ti = 0, star = std::string_view::npos, mark = 0;
  while (ti < t.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == t[ti])) {
      ++pi;
      ++ti;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = ti;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      ti = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t end = text.find(sep, start);
    parts.emplace_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

std::vector<std::string> param_names(const FormatTraits& format) {
  std::vector<std::string> names;
  for (const auto& [key, value] : format.defaults.items()) names.push_back(key);
  for (const auto& [key, value] : format.quantize_options.items()) names.push_back(key);
  if (!format.defaults.contains(kFullPrecision)) names.emplace_back(kFullPrecision);
  names.emplace_back("fallback=keep");
  return names;
}

// The default that fixes a parameter's type; null when the key is unknown.
const nlohmann::json* param_default(const FormatTraits& format, const std::string& key) {
  static const nlohmann::json kBoolDefault = false;
  if (auto it = format.defaults.find(key); it != format.defaults.end()) return &*it;
  if (auto it = format.quantize_options.find(key); it != format.quantize_options.end()) return &*it;
  if (key == kFullPrecision) return &kBoolDefault;
  return nullptr;
}

bool same_type(const nlohmann::json& want, const nlohmann::json& got) {
  if (want.is_boolean()) return got.is_boolean();
  if (want.is_number_integer()) return got.is_number_integer();
  if (want.is_number()) return got.is_number();
  if (want.is_string()) return got.is_string();
  return true;  // null or structured default: accept what the user wrote
}

std::string type_name(const nlohmann::json& value) {
  if (value.is_boolean()) return "a bool";
  if (value.is_number_integer()) return "an integer";
  if (value.is_number()) return "a number";
  if (value.is_string()) return "a string";
  return "any value";
}

// Converts "key=value" text to the JSON type of the parameter's default.
nlohmann::json typed_value(const nlohmann::json& want, const std::string& text) {
  if (want.is_boolean()) {
    if (text == "true" || text == "1") return true;
    if (text == "false" || text == "0") return false;
  } else if (want.is_number_integer()) {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc() && end == text.data() + text.size()) return v;
  } else if (want.is_number()) {
    try {
      size_t used = 0;
      double v = std::stod(text, &used);
      if (used == text.size()) return v;
    } catch (const std::exception&) {
    }
  } else if (want.is_string()) {
    return text;
  } else {
    auto parsed = try_parse_strict_json(text);
    return parsed ? std::move(*parsed) : nlohmann::json(text);
  }
  return nullptr;  // not convertible
}

template <class E>
const FormatTraits* resolve_format(const std::string& name, const std::string& origin) {
  if (name == kKeep) return nullptr;
  const FormatTraits* format = find_format(name);
  if (format == nullptr)
    throw E(fmt::format("{}: unknown format '{}' (valid: {})", origin, name,
                        fmt::join(quantizable_format_names(), ", ")));
  if (format->quantize == nullptr)
    throw E(fmt::format("{}: format '{}' cannot be produced by mixq quantize (it needs "
                        "calibration data); quantizable: {}",
                        origin, name, fmt::join(quantizable_format_names(), ", ")));
  return format;
}

// Adds one parameter to `rule`, checking name and type. `text` is set when the
// value came from the command line and still needs its type.
template <class E>
void add_param(RecipeRule& rule, const std::string& key, const nlohmann::json& value,
               bool from_text) {
  if (key == kFallback) {
    if (!value.is_string() || value.get<std::string>() != kKeep)
      throw E(fmt::format("{}: fallback must be \"keep\", found {}", rule.origin, value.dump()));
    rule.fallback_keep = true;
    return;
  }
  if (rule.keeps())
    throw E(fmt::format("{}: 'keep' takes no parameters, found '{}'", rule.origin, key));
  const nlohmann::json* want = param_default(*rule.format, key);
  if (want == nullptr)
    throw E(fmt::format("{}: format '{}' has no parameter '{}' (valid: {})", rule.origin,
                        rule.format->name, key, fmt::join(param_names(*rule.format), ", ")));
  nlohmann::json typed = from_text ? typed_value(*want, value.get<std::string>()) : value;
  if (typed.is_null() || !same_type(*want, typed))
    throw E(fmt::format("{}: parameter '{}' of format '{}' must be {}, found {}", rule.origin, key,
                        rule.format->name, type_name(*want), value.dump()));
  rule.params[key] = typed;
}

RecipeRule parse_rule_object(const nlohmann::json& json, const std::string& origin,
                             bool needs_match) {
  RecipeRule rule;
  rule.origin = origin;
  if (json.is_string()) {  // "default": "keep" / "nvfp4"
    rule.format = resolve_format<Error>(json.get<std::string>(), origin);
    return rule;
  }
  if (!json.is_object()) fail("{}: expected an object, found {}", origin, json.dump());
  if (needs_match) {
    auto match = json.find("match");
    if (match == json.end() || !match->is_string() || match->get<std::string>().empty())
      fail("{}: needs a non-empty string \"match\"", origin);
    rule.match = match->get<std::string>();
  }
  auto format = json.find("format");
  if (format == json.end() || !format->is_string())
    fail("{}: needs a string \"format\" (a format name or \"keep\")", origin);
  rule.format = resolve_format<Error>(format->get<std::string>(), origin);
  for (const auto& [key, value] : json.items()) {
    if (key == "match" || key == "format" || key == "comment") continue;
    add_param<Error>(rule, key, value, false);
  }
  return rule;
}

}  // namespace

std::string RecipeRule::describe() const {
  if (keeps()) return std::string(kKeep);
  std::string text(format->name);
  if (!params.empty() || fallback_keep) {
    std::vector<std::string> parts;
    for (const auto& [key, value] : params.items())
      parts.push_back(key + "=" + (value.is_string() ? value.get<std::string>() : value.dump()));
    if (fallback_keep) parts.emplace_back("fallback=keep");
    text += fmt::format("{{{}}}", fmt::join(parts, ","));
  }
  return text;
}

const RecipeRule& Recipe::decide(std::string_view prefix) const {
  for (const RecipeRule& rule : rules)
    if (glob_match(rule.match, prefix)) return rule;
  return fallback;
}

bool glob_match(std::string_view pattern, std::string_view text) {
  size_t open = pattern.find('{');
  if (open == std::string_view::npos) return wildcard_match(pattern, text);
  size_t close = pattern.find('}', open);
  if (close == std::string_view::npos) return wildcard_match(pattern, text);  // literal '{'
  std::string head(pattern.substr(0, open));
  std::string_view tail = pattern.substr(close + 1);
  for (const std::string& alt : split(pattern.substr(open + 1, close - open - 1), ','))
    if (glob_match(head + alt + std::string(tail), text)) return true;
  return false;
}

std::vector<std::string> quantizable_format_names() {
  std::vector<std::string> names;
  for (const FormatTraits* format : all_formats())
    if (format->from_marker && format->quantize != nullptr) names.emplace_back(format->name);
  names.emplace_back(kKeep);
  return names;
}

RecipeRule parse_rule(std::string_view text, std::string origin) {
  origin = fmt::format("{} '{}'", origin, text);
  size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0)
    throw UsageError(fmt::format("{}: expected PATTERN=FORMAT[:key=value,...]", origin));
  RecipeRule rule;
  rule.origin = origin;
  rule.match = std::string(text.substr(0, eq));
  std::string_view rest = text.substr(eq + 1);
  size_t colon = rest.find(':');
  rule.format = resolve_format<UsageError>(std::string(rest.substr(0, colon)), origin);
  if (colon == std::string_view::npos) return rule;
  for (const std::string& item : split(rest.substr(colon + 1), ',')) {
    size_t at = item.find('=');
    if (at == std::string::npos || at == 0)
      throw UsageError(fmt::format("{}: parameter '{}' is not key=value", origin, item));
    add_param<UsageError>(rule, item.substr(0, at), nlohmann::json(item.substr(at + 1)), true);
  }
  return rule;
}

Recipe parse_recipe(const nlohmann::json& json, const std::string& origin) {
  if (!json.is_object()) fail("{}: a recipe is a JSON object with \"rules\"", origin);
  for (const auto& [key, value] : json.items())
    if (key != "rules" && key != "default" && key != "comment" && key != "description")
      fail("{}: unknown key '{}' (valid: rules, default, description)", origin, key);
  Recipe recipe;
  recipe.fallback.origin = origin + " default";
  auto rules = json.find("rules");
  if (rules == json.end() || !rules->is_array())
    fail("{}: needs an array \"rules\"", origin);
  for (size_t i = 0; i < rules->size(); ++i)
    recipe.rules.push_back(
        parse_rule_object((*rules)[i], fmt::format("{} rule {}", origin, i + 1), true));
  if (auto def = json.find("default"); def != json.end()) {
    recipe.fallback = parse_rule_object(*def, origin + " default", false);
    recipe.fallback.match = "*";
  }
  return recipe;
}

Recipe load_recipe(const std::string& path) {
  const std::string text = read_whole_file(path, kMaxRecipeBytes, "recipe");
  return parse_recipe(parse_strict_json(text, path + ": recipe"), path);
}

}  // namespace mixq
