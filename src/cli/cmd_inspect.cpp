// mixq inspect: placeholder until its issue lands; fails loudly rather than pretending.
#include "cli/commands.hpp"
#include "mixq/error.hpp"

namespace mixq::cli {

void add_inspect(CLI::App& root) {
  auto* cmd = root.add_subcommand("inspect", "(not built yet)");
  cmd->allow_extras();
  cmd->callback([] { fail("'inspect' is not implemented yet"); });
}

}  // namespace mixq::cli
