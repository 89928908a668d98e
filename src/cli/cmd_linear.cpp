// mixq linear: placeholder until its issue lands; fails loudly rather than pretending.
#include "cli/commands.hpp"
#include "mixq/error.hpp"

namespace mixq::cli {

void add_linear(CLI::App& root) {
  auto* cmd = root.add_subcommand("linear", "(not built yet)");
  cmd->allow_extras();
  cmd->callback([] { fail("'linear' is not implemented yet"); });
}

}  // namespace mixq::cli
