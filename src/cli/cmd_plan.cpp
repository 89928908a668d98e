// mixq plan: placeholder until its issue lands; fails loudly rather than pretending.
#include "cli/commands.hpp"
#include "mixq/error.hpp"

namespace mixq::cli {

void add_plan(CLI::App& root) {
  auto* cmd = root.add_subcommand("plan", "(not built yet)");
  cmd->allow_extras();
  cmd->callback([] { fail("'plan' is not implemented yet"); });
}

}  // namespace mixq::cli
