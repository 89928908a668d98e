// mixq dequantize: placeholder until its issue lands; fails loudly rather than pretending.
#include "cli/commands.hpp"
#include "mixq/error.hpp"

namespace mixq::cli {

void add_dequantize(CLI::App& root) {
  auto* cmd = root.add_subcommand("dequantize", "(not built yet)");
  cmd->allow_extras();
  cmd->callback([] { fail("'dequantize' is not implemented yet"); });
}

}  // namespace mixq::cli
