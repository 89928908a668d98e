// mixq quantize: placeholder until its issue lands; fails loudly rather than pretending.
#include "cli/commands.hpp"
#include "mixq/error.hpp"

namespace mixq::cli {

void add_quantize(CLI::App& root) {
  auto* cmd = root.add_subcommand("quantize", "(not built yet)");
  cmd->allow_extras();
  cmd->callback([] { fail("'quantize' is not implemented yet"); });
}

}  // namespace mixq::cli
