#include "io/strict_json.hpp"

#include <unordered_set>
#include <vector>

#include "mixq/error.hpp"

namespace mixq {
namespace {

using nlohmann::json;

// SAX handler: builds the DOM with nlohmann's own builder and adds the checks.
// (nlohmann's parser callback would do too, but its end_object rescans the
// parent object for discarded values, which is quadratic in the number of
// tensors of a header.)
class StrictSax {
 public:
  StrictSax(json& result, const std::string& where) : dom_(result, true), where_(where) {}

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return dom_.number_float(v, s); }
  bool string(json::string_t& v) { return dom_.string(v); }
  bool binary(json::binary_t& v) { return dom_.binary(v); }
  bool start_object(std::size_t n) {
    open(true);
    return dom_.start_object(n);
  }
  bool key(json::string_t& k) {
    if (!levels_.back().is_object || !levels_.back().keys.insert(k).second)
      fail("{}: duplicate key '{}' in JSON", where_, k);
    return dom_.key(k);
  }
  bool end_object() {
    levels_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    open(false);
    return dom_.start_array(n);
  }
  bool end_array() {
    levels_.pop_back();
    return dom_.end_array();
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    // nlohmann's message carries the position ("at line 1, column 17").
    fail("{}: invalid JSON: {}", where_, e.what());
  }

 private:
  struct Level {
    bool is_object = false;
    std::unordered_set<std::string> keys;
  };
  void open(bool is_object) {
    if (levels_.size() >= static_cast<size_t>(kMaxJsonDepth))
      fail("{}: JSON nested deeper than {} levels", where_, kMaxJsonDepth);
    levels_.push_back(Level{is_object, {}});
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  const std::string& where_;
  std::vector<Level> levels_;
};

}  // namespace

nlohmann::json parse_strict_json(std::string_view text, const std::string& where) {
  json result;
  StrictSax sax(result, where);
  try {
    json::sax_parse(text.begin(), text.end(), &sax, json::input_format_t::json, /*strict=*/true,
                    /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    fail("{}: invalid JSON: {}", where, e.what());
  }
  return result;
}

}  // namespace mixq
