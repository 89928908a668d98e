// mixq verify: placeholder until its issue lands; fails loudly rather than pretending.
#include "cli/commands.hpp"
#include "mixq/error.hpp"

namespace mixq::cli {

void add_verify(CLI::App& root) {
  auto* cmd = root.add_subcommand("verify", "(not built yet)");
  cmd->allow_extras();
  cmd->callback([] { fail("'verify' is not implemented yet"); });
}

}  // namespace mixq::cli
