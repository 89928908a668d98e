#include "io/strict_json.hpp"

#include <unordered_set>
#include <vector>

#include "mixq/error.hpp"

namespace mixq {
namespace {

using nlohmann::json;
using DomBuilder = nlohmann::detail::json_sax_dom_parser<json>;

// The strict checks shared by both parsers: one Level per open object or
// array, duplicate keys per object, the depth cap.
class Levels {
 public:
  explicit Levels(const std::string& where) : where_(where) {}
  void open(bool is_object) {
    if (levels_.size() >= static_cast<size_t>(kMaxJsonDepth))
      fail("{}: JSON nested deeper than {} levels", where_, kMaxJsonDepth);
    levels_.push_back(Level{is_object, {}});
  }
  void close() { levels_.pop_back(); }
  void key(const std::string& k, bool check_duplicates) {
    if (!levels_.back().is_object) fail("{}: invalid JSON: a key outside an object", where_);
    if (check_duplicates && !levels_.back().keys.insert(k).second)
      fail("{}: duplicate key '{}' in JSON", where_, k);
  }
  size_t depth() const { return levels_.size(); }

 private:
  struct Level {
    bool is_object = false;
    std::unordered_set<std::string> keys;
  };
  const std::string& where_;
  std::vector<Level> levels_;
};

[[noreturn]] void syntax_error(const std::string& where, const nlohmann::detail::exception& e) {
  // nlohmann's message carries the position ("at line 1, column 17").
  fail("{}: invalid JSON: {}", where, e.what());
}

// SAX handler: builds the DOM with nlohmann's own builder and adds the checks.
// (nlohmann's parser callback would do too, but its end_object rescans the
// parent object for discarded values, which is quadratic in the number of
// tensors of a header.)
class StrictSax {
 public:
  StrictSax(json& result, const std::string& where) : dom_(result, true), where_(where), levels_(where) {}

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return dom_.number_float(v, s); }
  bool string(json::string_t& v) { return dom_.string(v); }
  bool binary(json::binary_t& v) { return dom_.binary(v); }
  bool start_object(std::size_t n) {
    levels_.open(true);
    return dom_.start_object(n);
  }
  bool key(json::string_t& k) {
    levels_.key(k, true);
    return dom_.key(k);
  }
  bool end_object() {
    levels_.close();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    levels_.open(false);
    return dom_.start_array(n);
  }
  bool end_array() {
    levels_.close();
    return dom_.end_array();
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    syntax_error(where_, e);
  }

 private:
  DomBuilder dom_;
  const std::string& where_;
  Levels levels_;
};

// SAX handler for parse_strict_json_members: level 1 is the top-level object;
// each member's value is built into its own DOM and handed over when it ends.
class MemberSax {
 public:
  using Callback = std::function<void(std::string&&, json&&)>;
  MemberSax(const std::string& where, const Callback& member) : where_(where), levels_(where), member_(member) {}

  bool null() { return nested() ? dom_->null() : top(json(nullptr)); }
  bool boolean(bool v) { return nested() ? dom_->boolean(v) : top(json(v)); }
  bool number_integer(json::number_integer_t v) { return nested() ? dom_->number_integer(v) : top(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return nested() ? dom_->number_unsigned(v) : top(json(v)); }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return nested() ? dom_->number_float(v, s) : top(json(v));
  }
  bool string(json::string_t& v) { return nested() ? dom_->string(v) : top(json(std::move(v))); }
  bool binary(json::binary_t& v) { return nested() ? dom_->binary(v) : top(json(std::move(v))); }
  bool start_object(std::size_t n) {
    if (levels_.depth() == 0) {
      levels_.open(true);
      return true;
    }
    begin_member();
    levels_.open(true);
    return dom_->start_object(n);
  }
  bool key(json::string_t& k) {
    if (levels_.depth() == 1) {
      levels_.key(k, false);
      key_ = std::move(k);
      return true;
    }
    levels_.key(k, true);
    return dom_->key(k);
  }
  bool end_object() {
    levels_.close();
    if (levels_.depth() == 0) return true;
    const bool ok = dom_->end_object();
    end_member();
    return ok;
  }
  bool start_array(std::size_t n) {
    if (levels_.depth() == 0) not_an_object("array");
    begin_member();
    levels_.open(false);
    return dom_->start_array(n);
  }
  bool end_array() {
    levels_.close();
    const bool ok = dom_->end_array();
    end_member();
    return ok;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    syntax_error(where_, e);
  }

 private:
  [[noreturn]] void not_an_object(const char* found) { fail("{}: must be a JSON object, found {}", where_, found); }
  // Inside a member's object or array (level 2 and deeper).
  bool nested() const { return levels_.depth() >= 2; }
  // A scalar at level 0 (the document) or level 1 (a member's whole value).
  bool top(json&& value) {
    if (levels_.depth() == 0) not_an_object(value.type_name());
    member_(std::move(key_), std::move(value));
    return true;
  }
  // A structured member value starts at level 1.
  void begin_member() {
    if (levels_.depth() != 1) return;
    value_ = json();
    dom_.emplace(value_, true);
  }
  void end_member() {
    if (levels_.depth() != 1) return;
    dom_.reset();
    member_(std::move(key_), std::move(value_));
  }

  const std::string& where_;
  Levels levels_;
  const Callback& member_;
  std::string key_;
  json value_;
  std::optional<DomBuilder> dom_;
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

std::optional<nlohmann::json> try_parse_strict_json(std::string_view text) {
  try {
    return parse_strict_json(text, "");
  } catch (const Error&) {
    return std::nullopt;
  }
}

void parse_strict_json_members(std::string_view text, const std::string& where,
                               const std::function<void(std::string&&, nlohmann::json&&)>& member) {
  MemberSax sax(where, member);
  try {
    json::sax_parse(text.begin(), text.end(), &sax, json::input_format_t::json, /*strict=*/true,
                    /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    fail("{}: invalid JSON: {}", where, e.what());
  }
}

}  // namespace mixq
