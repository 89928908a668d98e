// mixq bench: placeholder until its issue lands; fails loudly rather than pretending.
#include "cli/commands.hpp"
#include "mixq/error.hpp"

namespace mixq::cli {

void add_bench(CLI::App& root) {
  auto* cmd = root.add_subcommand("bench", "(not built yet)");
  cmd->allow_extras();
  cmd->callback([] { fail("'bench' is not implemented yet"); });
}

}  // namespace mixq::cli
