// nlohmann::json -> Python objects, without a round trip through text.
#include "bindings.hpp"

namespace mixq::py {

nb::object to_python(const nlohmann::json& value) {
  using T = nlohmann::json::value_t;
  switch (value.type()) {
    case T::null:
    case T::discarded:
      return nb::none();
    case T::boolean:
      return nb::bool_(value.get<bool>());
    case T::number_integer:
      return nb::int_(value.get<int64_t>());
    case T::number_unsigned:
      return nb::int_(value.get<uint64_t>());
    case T::number_float:
      return nb::float_(value.get<double>());
    case T::string: {
      const std::string& s = value.get_ref<const std::string&>();
      return nb::str(s.data(), s.size());
    }
    case T::array: {
      nb::list list;
      for (const auto& item : value) list.append(to_python(item));
      return list;
    }
    case T::object: {
      nb::dict dict;
      for (const auto& [key, item] : value.items()) dict[nb::str(key.data(), key.size())] = to_python(item);
      return dict;
    }
    case T::binary:
      break;
  }
  return nb::none();
}

}  // namespace mixq::py
